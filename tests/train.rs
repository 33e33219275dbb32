//! The MLP example, shortened: a few epochs of `examples/train_mlp.rs` must already classify the
//! held-out digits well (the full run reaches about 97%).

#[allow(dead_code)]
#[path = "../examples/train_mlp.rs"]
mod train_mlp;

#[test]
fn mlp_learns_the_digits() {
    let report = train_mlp::train(8, false, &ferrax::Device::Cpu).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        report.final_loss < 0.15,
        "training loss {}",
        report.final_loss
    );
    assert!(
        report.test_accuracy >= 0.95,
        "test accuracy {}",
        report.test_accuracy
    );
}
