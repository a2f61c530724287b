//! Synthetic ONNX models for the bench and the browser's measurements: one of a given size
//! (weights stored), one of a given number of nodes (a chain).

use prost::Message;

use super::proto;

/// A float tensor's value info of shape `dims`.
fn value(name: &str, dims: &[i64]) -> proto::ValueInfoProto {
    use proto::*;
    ValueInfoProto {
        name: name.to_string(),
        r#type: Some(TypeProto {
            tensor_type: Some(TensorTypeProto {
                elem_type: 1,
                shape: Some(TensorShapeProto {
                    dim: dims
                        .iter()
                        .map(|&d| Dimension {
                            dim_value: Some(d),
                            dim_param: None,
                        })
                        .collect(),
                }),
            }),
        }),
    }
}

/// The model around `graph`, as the reader takes it (opset 17).
fn model(graph: proto::GraphProto) -> Vec<u8> {
    proto::ModelProto {
        ir_version: 8,
        producer_name: "memplan bench".into(),
        graph: Some(graph),
        opset_import: vec![proto::OperatorSetIdProto {
            domain: String::new(),
            version: 17,
        }],
    }
    .encode_to_vec()
}

/// A chain of `nodes` Relu nodes over a `[1, 256]` float input: every intermediate a remat
/// candidate, as in an imported model, so loading must not be quadratic in the nodes.
pub fn relu_chain(nodes: usize) -> Vec<u8> {
    let mut graph = proto::GraphProto {
        name: format!("Relu chain of {nodes}"),
        input: vec![value("x", &[1, 256])],
        ..proto::GraphProto::default()
    };
    let mut x = "x".to_string();
    for i in 0..nodes {
        let y = format!("r{i}");
        graph.node.push(proto::NodeProto {
            input: vec![x],
            output: vec![y.clone()],
            name: y.clone(),
            op_type: "Relu".into(),
            ..proto::NodeProto::default()
        });
        x = y;
    }
    graph.output.push(value(&x, &[1, 256]));
    model(graph)
}

/// A model of about `megabytes` MB for benchmarks: conv-relu blocks of 256 channels at 56x56,
/// each with its weights stored in the file (2.4 MB a block), written with the same messages the
/// reader decodes.
pub fn synthetic_model(megabytes: u64) -> Vec<u8> {
    use proto::*;
    let c = 256i64;
    let weights = (c * c * 9 * 4) as u64;
    let blocks = (megabytes * 1_000_000).div_ceil(weights).max(1) as usize;
    let ints = |name: &str, v: Vec<i64>| AttributeProto {
        name: name.into(),
        ints: v,
        ..AttributeProto::default()
    };
    let mut graph = GraphProto {
        name: format!("synthetic {megabytes} MB"),
        input: vec![value("x", &[1, c, 56, 56])],
        ..GraphProto::default()
    };
    let mut x = "x".to_string();
    for i in 0..blocks {
        let (w, b, conv, relu) = (
            format!("w{i}"),
            format!("b{i}"),
            format!("conv{i}"),
            format!("relu{i}"),
        );
        graph.initializer.push(TensorProto {
            dims: vec![c, c, 3, 3],
            data_type: 1,
            name: w.clone(),
            raw_data: vec![0; weights as usize],
            ..TensorProto::default()
        });
        graph.initializer.push(TensorProto {
            dims: vec![c],
            data_type: 1,
            name: b.clone(),
            raw_data: vec![0; c as usize * 4],
            ..TensorProto::default()
        });
        graph.node.push(NodeProto {
            input: vec![x.clone(), w, b],
            output: vec![conv.clone()],
            name: conv.clone(),
            op_type: "Conv".into(),
            attribute: vec![
                ints("kernel_shape", vec![3, 3]),
                ints("pads", vec![1, 1, 1, 1]),
            ],
            ..NodeProto::default()
        });
        graph.node.push(NodeProto {
            input: vec![conv],
            output: vec![relu.clone()],
            name: relu.clone(),
            op_type: "Relu".into(),
            ..NodeProto::default()
        });
        x = relu;
    }
    graph.output.push(value(&x, &[1, c, 56, 56]));
    model(graph)
}
