fn main() {
    memplan_web::start();
}
