//! The emulator as a GPU machine: memory, loads, launches and cuBLAS-style matrix products.
#![allow(clippy::unwrap_used)]

use ferrax_ir::{DType, TensorType};
use ferrax_ptx_emu::{array_of, bytes_of, EmulatedArray, Emulator};
use ferrax_runtime::{Array, GpuMachine, MachineError, MatmulPrecision};

/// An entry `name` storing each thread's index to `out[%tid.x]`.
fn indices_ptx(name: &str) -> String {
    format!(
        "\
.version 7.0
.target sm_80
.address_size 64
.visible .entry {name}(
	.param .u64 {name}_param_0
)
{{
	.reg .b32 %r<2>;
	.reg .b64 %rd<4>;
	mov.u32 %r1, %tid.x;
	ld.param.u64 %rd1, [{name}_param_0];
	mul.wide.u32 %rd2, %r1, 4;
	add.s64 %rd3, %rd1, %rd2;
	st.global.b32 [%rd3], %r1;
	ret;
}}
"
    )
}

#[test]
fn arrays_go_up_and_come_back_unchanged() {
    let gpu = Emulator::default();
    assert_eq!(gpu.compute_capability(), (8, 0));
    let arrays = [
        Array::from_vec([2, 2], vec![1.5f32, -0.0, f32::NAN, 4.0]).unwrap(),
        Array::from_vec([3], vec![true, false, true]).unwrap(),
        Array::from_vec([2], vec![half::f16::ONE, half::f16::MAX]).unwrap(),
        Array::from_vec([2], vec![i64::MIN, 7]).unwrap(),
    ];
    for a in arrays {
        let up = gpu.upload(&a).unwrap();
        assert_eq!(&Emulator::array_type(&up), a.ty());
        let back = gpu.download(&up).unwrap();
        assert_eq!(bytes_of(&back), bytes_of(&a));
        assert_eq!(array_of(&bytes_of(&a), a.ty()).unwrap().ty(), a.ty());
    }
    // Bytes that are not the type's are refused.
    let ty = TensorType::new(DType::F32, [2]);
    assert!(array_of(&[0; 7], &ty).is_err());
}

#[test]
fn launches_run_at_once_and_are_recorded() {
    let gpu = Emulator::default();
    let functions = gpu.load(&indices_ptx("indices"), &["indices"]).unwrap();
    let out: EmulatedArray = gpu.alloc(&TensorType::new(DType::I32, [64])).unwrap();
    // SAFETY: `out` holds the 64 values the 64 threads store.
    unsafe { gpu.launch(&functions[0], 1, 64, &[Emulator::address(&out)]) }.unwrap();
    let got = gpu.download(&out).unwrap();
    assert_eq!(got.to_vec::<i32>().unwrap(), (0..64).collect::<Vec<_>>());
    assert_eq!(gpu.launched(), ["indices"]);
    // A grid-stride loop goes round: never more than two blocks.
    assert_eq!(gpu.grid_for(1 << 20, 256), 2);
    assert_eq!(gpu.grid_for(0, 256), 1);
}

#[test]
fn modules_without_an_entry_asked_for_do_not_load() {
    let gpu = Emulator::default();
    let refused = gpu.load(&indices_ptx("indices"), &["other"]).unwrap_err();
    assert!(
        matches!(&refused, MachineError::Refused(why) if why.contains("no entry other")),
        "{refused}"
    );
}

/// `C = op(A) · op(B)` column-major, as cuBLAS computes it, batched with strides.
#[test]
fn matrix_products_follow_cublas_conventions() {
    let gpu = Emulator::default();
    // A is 2 × 3 column-major (ld 2): [[1, 2, 3], [4, 5, 6]]; B is 3 × 2 (ld 3):
    // [[1, 0], [0, 1], [1, 1]]; the second batch doubles both.
    let a: Vec<f32> = vec![1., 4., 2., 5., 3., 6., 2., 8., 4., 10., 6., 12.];
    let b: Vec<f32> = vec![1., 0., 1., 0., 1., 1., 2., 0., 2., 0., 2., 2.];
    let a = gpu.upload(&Array::from_vec([12], a).unwrap()).unwrap();
    let b = gpu.upload(&Array::from_vec([12], b).unwrap()).unwrap();
    let c = gpu.alloc(&TensorType::new(DType::F32, [8])).unwrap();
    let (a_at, b_at, c_at) = (
        Emulator::address(&a),
        Emulator::address(&b),
        Emulator::address(&c),
    );
    // SAFETY: the operands hold two batches of the shapes given.
    unsafe {
        gpu.gemm(
            DType::F32,
            (false, false),
            (2, 2, 3),
            (a_at, 2, 6),
            (b_at, 3, 6),
            (c_at, 2, 4),
            2,
            MatmulPrecision::Highest,
        )
    }
    .unwrap();
    // A·B = [[4, 5], [10, 11]], column-major; the second batch four times that.
    let got = gpu.download(&c).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(got, [4., 10., 5., 11., 16., 40., 20., 44.]);
    // Bᵀ·Aᵀ = (A·B)ᵀ = [[4, 10], [5, 11]].
    // SAFETY: as above, one batch.
    unsafe {
        gpu.gemm(
            DType::F32,
            (true, true),
            (2, 2, 3),
            (b_at, 3, 0),
            (a_at, 2, 0),
            (c_at, 2, 0),
            1,
            MatmulPrecision::Highest,
        )
    }
    .unwrap();
    let got = gpu.download(&c).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(got[..4], [4., 5., 10., 11.]);
    assert_eq!(gpu.launched(), ["gemm", "gemm"]);
    // Integers are no cuBLAS product; an operand past its buffer is refused.
    // SAFETY: the emulator checks every address.
    let refused = unsafe {
        gpu.gemm(
            DType::I32,
            (false, false),
            (1, 1, 1),
            (a_at, 1, 0),
            (b_at, 1, 0),
            (c_at, 1, 0),
            1,
            MatmulPrecision::Highest,
        )
    };
    assert!(refused.is_err());
    // SAFETY: as above.
    let refused = unsafe {
        gpu.gemm(
            DType::F32,
            (false, false),
            (2, 2, 7),
            (a_at, 2, 0),
            (b_at, 7, 0),
            (c_at, 2, 0),
            1,
            MatmulPrecision::Highest,
        )
    };
    assert!(refused
        .unwrap_err()
        .to_string()
        .contains("outside every buffer"));
}
