//! Elements serialize with their infinities and NaNs (payloads included) in JSON, whose numbers
//! cannot hold them: each float as its bit pattern in human-readable formats.
#![allow(clippy::unwrap_used)]

use ferrax_ir::{Complex, Elements};
use half::{bf16, f16};

fn round_trip(e: &Elements) -> Elements {
    let json = serde_json::to_string(e).unwrap();
    serde_json::from_str(&json).unwrap()
}

#[test]
fn non_finite_floats_survive_json() {
    let payload = f32::from_bits(0x7fc0_1234);
    let cases = [
        Elements::F32(vec![f32::INFINITY, f32::NEG_INFINITY, payload, -0.0, 1.5]),
        Elements::F64(vec![f64::INFINITY, f64::NAN, f64::MIN_POSITIVE, -2.25]),
        Elements::F16(vec![f16::INFINITY, f16::NAN, f16::from_f32(0.5)]),
        Elements::BF16(vec![bf16::NEG_INFINITY, bf16::from_f32(3.0)]),
        Elements::C64(vec![Complex::new(f32::INFINITY, f32::NAN)]),
        Elements::C128(vec![Complex::new(-0.0, f64::NEG_INFINITY)]),
        Elements::I32(vec![-1, 2]),
    ];
    for e in cases {
        // `Elements` compare by bits: NaN payloads and signed zeros must survive too.
        assert_eq!(round_trip(&e), e, "{e:?}");
    }
}
