//! A synthetic ONNX model of a given size, for the bench and the browser's measurements.

use prost::Message;

use super::proto;

/// A model of about `megabytes` MB for benchmarks: conv-relu blocks of 256 channels at 56x56,
/// each with its weights stored in the file (2.4 MB a block), written with the same messages the
/// reader decodes.
pub fn synthetic_model(megabytes: u64) -> Vec<u8> {
    use proto::*;
    let c = 256i64;
    let weights = (c * c * 9 * 4) as u64;
    let blocks = (megabytes * 1_000_000).div_ceil(weights).max(1) as usize;
    let value = |name: &str, dims: &[i64]| ValueInfoProto {
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
    };
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
    ModelProto {
        ir_version: 8,
        producer_name: "memplan bench".into(),
        graph: Some(graph),
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: 17,
        }],
    }
    .encode_to_vec()
}
