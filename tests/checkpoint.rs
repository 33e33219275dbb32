//! `ferrax::checkpoint`: safetensors, `.npz` (stored and deflated) and `.npy` round trips of nested trees (derived
//! structs, `Vec`, `BTreeMap`, `Option`, arrays, an Adam state), the files Python wrote
//! (`tests/data/checkpoint/make.py`, which also checks that Python reads the committed
//! ferrax-written files), every error, and a light fuzz: truncated or bit-flipped files are
//! `Err`s or values, never panics.
#![allow(clippy::unwrap_used)]

use ferrax::checkpoint::{self, CheckpointError};
use ferrax::nn::{Attention, Linear};
use ferrax::optim::{self, GradientTransformation};
use ferrax::{tree_leaves, tree_map, zeros_like, Array, DType, Static, Tensor, Tree};
use half::{bf16, f16};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/checkpoint");

fn data(file: &str) -> PathBuf {
    Path::new(DATA).join(file)
}

fn t<T: ferrax::ir::Element>(shape: &[usize], v: Vec<T>) -> Tensor {
    Tensor::from_vec(shape.to_vec(), v)
}

/// The tree `make.py` writes: every dtype, names `layers.0.w`, ..., `state.0.mask`.
type Interop = BTreeMap<String, Vec<BTreeMap<String, Tensor>>>;

fn interop() -> Interop {
    let map = |kv: Vec<(&str, Tensor)>| -> BTreeMap<String, Tensor> {
        kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
    };
    let w0: Vec<f32> = (0..6).map(|i| i as f32 * 0.5 - 1.0).collect();
    let b0: Vec<f64> = (0..3).map(|i| i as f64 / 3.0).collect();
    let w1: Vec<f16> = [1.5, -2.0, 0.25, 65504.0].map(f16::from_f32).to_vec();
    let b1 = vec![bf16::from_f32(1.0), bf16::from_f32(-3.5)];
    let layers = vec![
        map(vec![("w", t(&[2, 3], w0)), ("b", t(&[3], b0))]),
        map(vec![("w", t(&[2, 2], w1)), ("b", t(&[2], b1))]),
    ];
    let state = vec![map(vec![
        ("count", Tensor::scalar(7i32)),
        ("ids", t(&[3], vec![-1i64, 0, 1 << 40])),
        ("pixels", t(&[4], vec![0u8, 1, 128, 255])),
        ("mask", t(&[2, 2], vec![true, false, false, true])),
    ])];
    [("layers".to_string(), layers), ("state".to_string(), state)].into()
}

fn arrays<T: Tree>(tree: &T) -> Vec<Array> {
    tree_leaves(tree)
        .iter()
        .map(|l| l.to_array().unwrap())
        .collect()
}

#[derive(Tree, Clone)]
struct Layer {
    w: Tensor,
    b: Option<Tensor>,
}

#[derive(Tree, Clone)]
struct Model {
    layers: Vec<Layer>,
    embed: BTreeMap<String, Tensor>,
    scale: [Tensor; 2],
    head: Box<Tensor>,
    depth: Static<u32>,
}

fn model() -> Model {
    let ramp = |n: usize, k: f32| t(&[n], (0..n).map(|i| i as f32 * k - 0.3).collect());
    Model {
        layers: vec![
            Layer {
                w: t(&[2, 2], vec![0.1f32, -0.2, 0.3, 0.4]),
                b: Some(ramp(2, 0.5)),
            },
            Layer {
                w: t(&[2, 3], (0..6).map(|i| i as f32).collect::<Vec<_>>()),
                b: None,
            },
        ],
        embed: [("tok".into(), ramp(4, 0.25)), ("pos".into(), ramp(3, -1.0))].into(),
        scale: [Tensor::scalar(1.5f32), Tensor::scalar(-0.5f32)],
        head: Box::new(ramp(5, 2.0)),
        depth: Static(2),
    }
}

/// Model names as ferrax wrote them before struct fields had names: positions throughout.
const POSITIONAL: [&str; 8] = [
    "0.0.0", "0.0.1.0", "0.1.0", "1.pos", "1.tok", "2.0", "2.1", "3",
];

#[test]
fn paths_are_jax_key_paths() {
    assert_eq!(
        checkpoint::tree_paths(&model()),
        [
            "layers.0.w",
            "layers.0.b",
            "layers.1.w",
            "embed.pos",
            "embed.tok",
            "scale.0",
            "scale.1",
            "head"
        ]
    );
    assert_eq!(
        checkpoint::tree_paths(&interop())[..3],
        ["layers.0.b", "layers.0.w", "layers.1.b"]
    );
    assert_eq!(checkpoint::tree_paths(&Tensor::scalar(1f32)), ["0"]);

    // The crate's layers and optimizer states inside derived structs, a tuple struct and a
    // raw identifier.
    #[derive(Tree, Clone)]
    struct Pair(Tensor, Tensor);
    #[derive(Tree, Clone)]
    struct Block {
        ln: Pair,
        attn: Attention,
        r#type: Tensor,
    }
    #[derive(Tree, Clone)]
    struct Gpt {
        wte: Tensor,
        layers: Vec<Block>,
    }
    let v = |n: usize| t(&[n], vec![0f32; n]);
    let linear = |n: usize| Linear {
        w: v(n),
        b: Some(v(n)),
    };
    let gpt = Gpt {
        wte: v(2),
        layers: vec![Block {
            ln: Pair(v(1), v(1)),
            attn: Attention {
                qkv: linear(3),
                proj: linear(4),
            },
            r#type: v(1),
        }],
    };
    let layer = [
        "layers.0.ln.0",
        "layers.0.ln.1",
        "layers.0.attn.qkv.w",
        "layers.0.attn.qkv.b",
        "layers.0.attn.proj.w",
        "layers.0.attn.proj.b",
        "layers.0.type",
    ];
    let params: Vec<String> = ["wte"]
        .iter()
        .chain(&layer)
        .map(|p| p.to_string())
        .collect();
    assert_eq!(checkpoint::tree_paths(&gpt), params);
    let opt = optim::adam(1e-3, 0.9, 0.999, 1e-8);
    let paths = checkpoint::tree_paths(&(gpt.clone(), opt.init(&gpt)));
    let n = params.len();
    assert_eq!(paths.len(), 3 * n + 1, "{paths:?}");
    assert!(paths[..n]
        .iter()
        .zip(&params)
        .all(|(p, q)| *p == format!("0.{q}")));
    assert_eq!(paths[n], "1.0.count");
    assert_eq!(paths[n + 1], "1.0.mu.wte");
    assert_eq!(paths[2 * n + 1], "1.0.nu.wte");
    assert_eq!(paths[3 * n], "1.0.nu.layers.0.type");

    // Files named by position, as before, load into the named template.
    let old: BTreeMap<String, Tensor> = POSITIONAL
        .iter()
        .map(|n| n.to_string())
        .zip(tree_leaves(&model()))
        .collect();
    let bytes = checkpoint::safetensors_to_bytes(&old).unwrap();
    let loaded = checkpoint::safetensors_from_bytes(&bytes, &model()).unwrap();
    assert_eq!(arrays(&loaded), arrays(&model()));
    let bytes = checkpoint::npz_to_bytes(&old).unwrap();
    let loaded = checkpoint::npz_from_bytes(&bytes, &model()).unwrap();
    assert_eq!(arrays(&loaded), arrays(&model()));
    // A file with only some of them is named by the template's paths in the error.
    let mut partial = old.clone();
    partial.remove("3");
    let bytes = checkpoint::safetensors_to_bytes(&partial).unwrap();
    let e = checkpoint::safetensors_from_bytes(&bytes, &model()).err();
    assert!(
        matches!(&e, Some(CheckpointError::Missing { name }) if name == "layers.0.w"),
        "{e:?}"
    );
}

#[test]
fn nested_trees_and_adam_state_round_trip() {
    let params = model();
    let opt = optim::adam(1e-2, 0.9, 0.999, 1e-8);
    let grads = tree_map(&params, |x| x.clone() + x.clone());
    let (_, state) = opt.update(&grads, &opt.init(&params), &params);
    let saved = (params.clone(), state);
    let template = (zeros_like(&params), opt.init(&params));
    let dir = std::env::temp_dir().join(format!("ferrax-ckpt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();

    let path = dir.join("step.safetensors");
    checkpoint::save_safetensors(&path, &saved).unwrap();
    let loaded = checkpoint::load_safetensors(&path, &template).unwrap();
    assert_eq!(arrays(&loaded), arrays(&saved));
    assert_eq!(loaded.1 .0.count.to_vec::<i32>().unwrap(), [1]);
    assert!(loaded.0.layers[1].b.is_none() && loaded.0.depth == Static(2));

    let path = dir.join("step.npz");
    checkpoint::save_npz(&path, &saved).unwrap();
    let loaded = checkpoint::load_npz(&path, &template).unwrap();
    assert_eq!(arrays(&loaded), arrays(&saved));
    std::fs::remove_dir_all(&dir).unwrap();

    // Every dtype, both formats, and a spec-only template.
    let all = interop();
    let specs = tree_map(&all, |x| Tensor::spec(x.dtype(), x.shape().to_vec()));
    let bytes = checkpoint::safetensors_to_bytes(&all).unwrap();
    let back = checkpoint::safetensors_from_bytes(&bytes, &specs).unwrap();
    assert_eq!(arrays(&back), arrays(&all));
    let bytes = checkpoint::npz_to_bytes(&all).unwrap();
    assert_eq!(
        arrays(&checkpoint::npz_from_bytes(&bytes, &specs).unwrap()),
        arrays(&all)
    );
}

#[test]
fn npy_round_trips_every_dtype_and_shape() {
    for x in tree_leaves(&interop()).into_iter().chain([
        t(&[0, 3], Vec::<f32>::new()),
        t(&[1, 1, 2], vec![bf16::from_f32(0.5), bf16::from_f32(-8.0)]),
    ]) {
        let bytes = checkpoint::npy_to_bytes(&x).unwrap();
        let header_end = bytes.iter().position(|&b| b == b'\n').unwrap() + 1;
        assert_eq!(header_end % 64, 0, "NumPy aligns the data to 64 bytes");
        let back = checkpoint::npy_from_bytes(&bytes).unwrap();
        assert_eq!(back.to_array().unwrap(), x.to_array().unwrap());
    }
}

#[test]
fn python_written_files_load() {
    let want = arrays(&interop());
    let got = checkpoint::load_safetensors(data("python.safetensors"), &interop()).unwrap();
    assert_eq!(arrays(&got), want);
    let got = checkpoint::load_npz(data("python.npz"), &interop()).unwrap();
    assert_eq!(arrays(&got), want);

    // A Fortran-ordered, a big-endian and a 0-d array, without a template.
    let layouts = checkpoint::read_npz(data("python_layouts.npz")).unwrap();
    let w = &interop()["layers"][0]["w"];
    let wt: Vec<f32> = (0..6)
        .map(|k| w.to_vec::<f32>().unwrap()[(k % 2) * 3 + k / 2])
        .collect();
    assert_eq!(layouts["fortran"].shape(), [3, 2]);
    assert_eq!(layouts["fortran"].to_vec::<f32>().unwrap(), wt);
    assert_eq!(
        layouts["big"].to_vec::<i32>().unwrap(),
        [-2, -1, 0, 1, 2, 3]
    );
    assert_eq!(layouts["scalar"].to_vec::<f64>().unwrap(), [2.5]);
    assert_eq!(layouts["scalar"].shape(), [0usize; 0]);

    let all = checkpoint::read_safetensors(data("python.safetensors")).unwrap();
    assert_eq!(all["layers.1.b"].dtype(), DType::BF16);

    // numpy.savez_compressed: the same arrays, and deflate streams of several blocks.
    let compressed = checkpoint::read_npz(data("python_compressed.npz")).unwrap();
    let names = checkpoint::tree_paths(&interop());
    let got: Vec<Array> = names
        .iter()
        .map(|n| compressed[n].to_array().unwrap())
        .collect();
    assert_eq!(got, want);
    assert_eq!(compressed["hashed"].to_vec::<f32>().unwrap(), hashed());
    assert_eq!(compressed["zeros"].to_vec::<f32>().unwrap(), [0.0; 10000]);
    assert_eq!(compressed.len(), names.len() + 2);
}

/// `make.py`'s `compressible()["hashed"]`: 4096 scattered values, exact in f32.
fn hashed() -> Vec<f32> {
    (0..4096u64)
        .map(|k| ((k * 2_654_435_761) % 65536) as f32 / 256.0)
        .collect()
}

/// `ferrax::checkpoint`'s deflated `.npz` (`numpy.savez_compressed`) round trips, shrinks what
/// repeats, and a corrupt stream, a wrong CRC or an impossible size is an `Err` naming the
/// member.
#[test]
fn compressed_npz_round_trips_and_bad_members_are_errors() {
    let mut all = ab();
    all.insert("hashed".into(), t(&[64, 64], hashed()));
    all.insert("zeros".into(), Tensor::zeros(DType::F32, [10000]));
    let packed = checkpoint::npz_compressed_to_bytes(&all).unwrap();
    let stored = checkpoint::npz_to_bytes(&all).unwrap();
    assert!(
        packed.len() * 3 < stored.len(),
        "{} vs {}",
        packed.len(),
        stored.len()
    );
    let back = checkpoint::npz_from_bytes(&packed, &all).unwrap();
    assert_eq!(arrays(&back), arrays(&all));
    let specs = tree_map(&interop(), |x| Tensor::spec(x.dtype(), x.shape().to_vec()));
    let bytes = checkpoint::npz_compressed_to_bytes(&interop()).unwrap();
    let back = checkpoint::npz_from_bytes(&bytes, &specs).unwrap();
    assert_eq!(arrays(&back), arrays(&interop()));
    let path = std::env::temp_dir().join(format!("ferrax-deflated-{}.npz", std::process::id()));
    checkpoint::save_npz_compressed(&path, &all).unwrap();
    assert_eq!(
        arrays(&checkpoint::load_npz(&path, &all).unwrap()),
        arrays(&all)
    );
    std::fs::remove_file(&path).unwrap();

    // Member `b` of `ab()`: its local header is the second, its data after `b.npy`.
    let bytes = checkpoint::npz_compressed_to_bytes(&ab()).unwrap();
    let find = |sig: &[u8], nth: usize| {
        let hits = bytes.windows(4).enumerate().filter(|(_, w)| *w == sig);
        hits.map(|(i, _)| i).nth(nth).unwrap()
    };
    let member_error = |bytes: &[u8], member: &str, what: &str| {
        let e = checkpoint::npz_from_bytes(bytes, &ab()).unwrap_err();
        assert!(
            matches!(&e, CheckpointError::Data { name, message }
                if name == member && message.contains(what)),
            "{e}"
        );
    };
    let mut corrupt = bytes.clone();
    corrupt[find(b"PK\x03\x04", 1) + 30 + 5] |= 0b110; // block type 3, which is reserved
    member_error(&corrupt, "b", "deflate stream is corrupt");
    // The CRC in `a`'s directory entry.
    let mut crc = bytes.clone();
    crc[find(b"PK\x01\x02", 0) + 16] ^= 1;
    member_error(&crc, "a", "CRC-32");
    // An uncompressed size no deflate stream of that length reaches, and one it misses.
    let mut huge = bytes.clone();
    let size_at = find(b"PK\x01\x02", 1) + 24;
    huge[size_at..size_at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    member_error(&huge, "b", "cannot inflate");
    let mut longer = bytes.clone();
    longer[size_at] = longer[size_at].wrapping_add(1);
    member_error(&longer, "b", "inflates to");
}

/// The committed ferrax-written files (which `make.py` checks Python reads) are what ferrax
/// writes today, byte for byte.
#[test]
fn committed_ferrax_files_are_current() {
    let all = interop();
    let st = std::fs::read(data("ferrax.safetensors")).unwrap();
    assert_eq!(st, checkpoint::safetensors_to_bytes(&all).unwrap());
    let npz = std::fs::read(data("ferrax.npz")).unwrap();
    assert_eq!(npz, checkpoint::npz_to_bytes(&all).unwrap());
    // Deflate's bytes may change with miniz_oxide's version; the values may not.
    let deflated = checkpoint::load_npz(data("ferrax_compressed.npz"), &all).unwrap();
    assert_eq!(arrays(&deflated), arrays(&all));
    let npy = std::fs::read(data("ferrax_bf16.npy")).unwrap();
    assert_eq!(npy, checkpoint::npy_to_bytes(&bf16_row()).unwrap());
}

fn bf16_row() -> Tensor {
    t(&[1, 3], [1.0, -3.5, 0.0078125].map(bf16::from_f32).to_vec())
}

/// Writes the ferrax files `make.py` checks: `cargo test --test checkpoint -- --ignored`.
#[test]
#[ignore]
fn write_ferrax_files() {
    checkpoint::save_safetensors(data("ferrax.safetensors"), &interop()).unwrap();
    checkpoint::save_npz(data("ferrax.npz"), &interop()).unwrap();
    checkpoint::save_npz_compressed(data("ferrax_compressed.npz"), &interop()).unwrap();
    checkpoint::save_npy(data("ferrax_bf16.npy"), &bf16_row()).unwrap();
}

type Flat = BTreeMap<String, Tensor>;

fn flat(kv: &[(&str, Tensor)]) -> Flat {
    kv.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
}

fn ab() -> Flat {
    flat(&[
        ("a", t(&[2], vec![1f32, 2.0])),
        ("b", t(&[2, 2], vec![1i32, 2, 3, 4])),
    ])
}

/// Saves with `save`, loads against `template` with `load`, for both tree formats.
fn both(template: &Flat, check: impl Fn(CheckpointError)) {
    let st = checkpoint::safetensors_to_bytes(&ab()).unwrap();
    check(checkpoint::safetensors_from_bytes(&st, template).unwrap_err());
    let npz = checkpoint::npz_to_bytes(&ab()).unwrap();
    check(checkpoint::npz_from_bytes(&npz, template).unwrap_err());
}

#[test]
fn template_mismatches_name_the_tensor() {
    let mut more = ab();
    more.insert("c".into(), Tensor::scalar(0f32));
    both(&more, |e| {
        assert!(
            matches!(&e, CheckpointError::Missing { name } if name == "c"),
            "{e}"
        )
    });
    let fewer = flat(&[("a", t(&[2], vec![0f32, 0.0]))]);
    both(&fewer, |e| {
        assert!(
            matches!(&e, CheckpointError::Extra { name } if name == "b"),
            "{e}"
        )
    });
    let mut dtype = ab();
    dtype.insert("a".into(), t(&[2], vec![0f64, 0.0]));
    both(&dtype, |e| {
        assert!(
            matches!(&e, CheckpointError::DType { name, expected: DType::F64, found }
                if name == "a" && found == "f32"),
            "{e}"
        );
        assert_eq!(
            e.to_string(),
            "tensor `a`: expected dtype f64, the file has f32"
        );
    });
    let mut shape = ab();
    shape.insert("b".into(), t(&[4], vec![0i32; 4]));
    both(&shape, |e| {
        assert!(
            matches!(&e, CheckpointError::Shape { name, expected, found }
                if name == "b" && *expected == [4] && *found == [2, 2]),
            "{e}"
        )
    });
}

#[test]
fn bad_files_are_errors() {
    // Truncated data names the tensor that is cut off (`b`: the crate writes `a` (f32) first
    // and `b` (i32) after, ordered by dtype).
    let st = checkpoint::safetensors_to_bytes(&ab()).unwrap();
    let e = checkpoint::safetensors_from_bytes(&st[..st.len() - 1], &ab()).unwrap_err();
    assert!(
        matches!(&e, CheckpointError::Truncated { what, .. } if what.contains("`b`")),
        "{e}"
    );
    let e = checkpoint::safetensors_from_bytes(&st[..20], &ab()).unwrap_err();
    assert!(matches!(e, CheckpointError::Truncated { .. }), "{e}");
    // A header that is not JSON.
    let mut bad = st.clone();
    bad[8] = b'!';
    let e = checkpoint::safetensors_from_bytes(&bad, &ab()).unwrap_err();
    assert!(matches!(e, CheckpointError::Header { .. }), "{e}");
    // A dtype ferrax lacks.
    let header = br#"{"x":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]}}"#;
    let mut fp8_file = (header.len() as u64).to_le_bytes().to_vec();
    fp8_file.extend(header);
    fp8_file.extend([0; 1]);
    let x = flat(&[("x", t(&[1], vec![0i32]))]);
    let e = checkpoint::safetensors_from_bytes(&fp8_file, &x).unwrap_err();
    assert!(
        matches!(&e, CheckpointError::DType { found, .. } if found == "F8_E4M3"),
        "{e}"
    );

    let npz = checkpoint::npz_to_bytes(&ab()).unwrap();
    let e = checkpoint::npz_from_bytes(&npz[..npz.len() - 30], &ab()).unwrap_err();
    assert!(matches!(e, CheckpointError::Truncated { .. }), "{e}");
    let mut flipped = npz.clone();
    // The first data byte of `a.npy`, after its header's newline.
    flipped[npz.iter().position(|&b| b == b'\n').unwrap() + 1] ^= 1;
    let e = checkpoint::npz_from_bytes(&flipped, &ab()).unwrap_err();
    assert!(
        matches!(&e, CheckpointError::Data { name, message } if name == "a" && message.contains("CRC")),
        "{e}"
    );

    let npy = checkpoint::npy_to_bytes(&t(&[2], vec![true, false])).unwrap();
    let e = checkpoint::npy_from_bytes(&npy[..npy.len() - 1]).unwrap_err();
    assert!(matches!(e, CheckpointError::Truncated { .. }), "{e}");
    let mut two = npy.clone();
    *two.last_mut().unwrap() = 2;
    let e = checkpoint::npy_from_bytes(&two).unwrap_err();
    assert!(matches!(e, CheckpointError::Data { .. }), "{e}");
    let e = checkpoint::npy_from_bytes(b"PK\x03\x04 not npy").unwrap_err();
    assert!(matches!(e, CheckpointError::Header { .. }), "{e}");

    let e = checkpoint::load_safetensors(data("no such file"), &ab()).unwrap_err();
    assert!(matches!(e, CheckpointError::Io { .. }), "{e}");
}

#[test]
fn unsavable_trees_are_errors() {
    // `{"a": {"b.c"}, "a.b": {"c"}}`: two leaves named `a.b.c`.
    let x = || flat(&[("c", Tensor::scalar(1f32))]);
    let clash: BTreeMap<String, Flat> = [
        ("a".to_string(), flat(&[("b.c", Tensor::scalar(1f32))])),
        ("a.b".to_string(), x()),
    ]
    .into();
    let e = checkpoint::safetensors_to_bytes(&clash).unwrap_err();
    assert!(
        matches!(&e, CheckpointError::Duplicate { name } if name == "a.b.c"),
        "{e}"
    );
    let spec = flat(&[("w", Tensor::spec(DType::F32, vec![2]))]);
    let e = checkpoint::npz_to_bytes(&spec).unwrap_err();
    assert!(
        matches!(&e, CheckpointError::Leaf { name, .. } if name == "w"),
        "{e}"
    );
}

/// Checkpoint errors convert into `ferrax::Error`, so `?` mixes loading with tracing and
/// running in one function; a wrapped tree error comes back as it was.
#[test]
fn checkpoint_errors_convert_into_ferrax_errors() {
    fn doubled(path: &Path) -> ferrax::Result<Vec<f32>> {
        let x = checkpoint::load_npy(path)?;
        let y = ferrax::jit(|x: Tensor| x * 2.0).call(x)?;
        y.to_vec::<f32>()
    }
    let path = std::env::temp_dir().join(format!("ferrax-doubled-{}.npy", std::process::id()));
    checkpoint::save_npy(&path, &t(&[2], vec![1f32, -3.0])).unwrap();
    assert_eq!(doubled(&path).unwrap(), [2.0, -6.0]);
    std::fs::remove_file(&path).unwrap();
    let e = doubled(&path).unwrap_err();
    assert!(
        matches!(&e, ferrax::Error::Checkpoint(c) if matches!(**c, CheckpointError::Io { .. })),
        "{e}"
    );
    assert!(e.to_string().contains("ferrax-doubled"), "{e}");
    assert_eq!(e.clone(), e);

    let tree = ferrax::Error::Tree {
        expected: "(*, *)".into(),
        found: "*".into(),
    };
    assert_eq!(
        ferrax::Error::from(CheckpointError::Tree(tree.clone())),
        tree
    );
}

/// Whether bytes load.
type Loads = dyn Fn(&[u8]) -> bool;

/// Every truncation of a valid file is an `Err`; every byte flipped three ways loads or fails,
/// never panics (safetensors and `.npy` have no checksum, so a flipped data byte is a value).
#[test]
fn fuzzed_files_never_panic() {
    let all = interop();
    let files: [(&str, Vec<u8>, Box<Loads>); 4] = [
        (
            "safetensors",
            checkpoint::safetensors_to_bytes(&all).unwrap(),
            Box::new(|b| checkpoint::safetensors_from_bytes(b, &interop()).is_ok()),
        ),
        (
            "npz",
            checkpoint::npz_to_bytes(&all).unwrap(),
            Box::new(|b| checkpoint::npz_from_bytes(b, &interop()).is_ok()),
        ),
        (
            "deflated npz",
            checkpoint::npz_compressed_to_bytes(&all).unwrap(),
            Box::new(|b| checkpoint::npz_from_bytes(b, &interop()).is_ok()),
        ),
        (
            "npy",
            checkpoint::npy_to_bytes(&bf16_row()).unwrap(),
            Box::new(|b| checkpoint::npy_from_bytes(b).is_ok()),
        ),
    ];
    for (format, bytes, load) in &files {
        assert!(load(bytes), "{format}: the valid file loads");
        for n in 0..bytes.len() {
            assert!(!load(&bytes[..n]), "{format}: a prefix of {n} bytes loaded");
        }
        let mut loaded = 0;
        for i in 0..bytes.len() {
            for mask in [0x01, 0x80, 0xff] {
                let mut b = bytes.clone();
                b[i] ^= mask;
                loaded += usize::from(load(&b));
            }
        }
        eprintln!("{format}: {loaded} of {} flips still load", 3 * bytes.len());
    }
}
