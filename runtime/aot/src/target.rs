//! The CPU an artifact's code was compiled for, and whether this machine is one: the
//! architecture and every instruction-set feature the code generator may have used.

use serde::{Deserialize, Serialize};

/// The CPU an artifact's code was compiled for: the architecture and the instruction-set
/// features the code generator used.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuTarget {
    pub arch: String,
    pub features: Vec<String>,
}

impl CpuTarget {
    /// This machine: the code generator compiles for every feature it detects.
    pub fn host() -> CpuTarget {
        CpuTarget {
            arch: std::env::consts::ARCH.to_string(),
            features: FEATURES
                .iter()
                .filter(|f| detected(f))
                .map(|f| f.to_string())
                .collect(),
        }
    }

    /// What `self` needs that this machine lacks, if anything.
    pub(crate) fn missing_here(&self) -> Option<String> {
        if self.arch != std::env::consts::ARCH {
            return Some(format!("the {} architecture", self.arch));
        }
        let missing: Vec<&str> = self
            .features
            .iter()
            .filter(|f| !detected(f))
            .map(String::as_str)
            .collect();
        (!missing.is_empty()).then(|| missing.join(", "))
    }
}

/// The x86-64 features Cranelift's native target detects (and may use).
const FEATURES: [&str; 19] = [
    "cmpxchg16b",
    "sse3",
    "ssse3",
    "sse4.1",
    "sse4.2",
    "popcnt",
    "avx",
    "avx2",
    "fma",
    "avxvnni",
    "avx512vnni",
    "bmi1",
    "bmi2",
    "avx512bitalg",
    "avx512dq",
    "avx512f",
    "avx512vl",
    "avx512vbmi",
    "lzcnt",
];

/// Whether this CPU has feature `name` (one of [`FEATURES`]; anything else, never).
fn detected(name: &str) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        match name {
            "cmpxchg16b" => std::is_x86_feature_detected!("cmpxchg16b"),
            "sse3" => std::is_x86_feature_detected!("sse3"),
            "ssse3" => std::is_x86_feature_detected!("ssse3"),
            "sse4.1" => std::is_x86_feature_detected!("sse4.1"),
            "sse4.2" => std::is_x86_feature_detected!("sse4.2"),
            "popcnt" => std::is_x86_feature_detected!("popcnt"),
            "avx" => std::is_x86_feature_detected!("avx"),
            "avx2" => std::is_x86_feature_detected!("avx2"),
            "fma" => std::is_x86_feature_detected!("fma"),
            "avxvnni" => std::is_x86_feature_detected!("avxvnni"),
            "avx512vnni" => std::is_x86_feature_detected!("avx512vnni"),
            "bmi1" => std::is_x86_feature_detected!("bmi1"),
            "bmi2" => std::is_x86_feature_detected!("bmi2"),
            "avx512bitalg" => std::is_x86_feature_detected!("avx512bitalg"),
            "avx512dq" => std::is_x86_feature_detected!("avx512dq"),
            "avx512f" => std::is_x86_feature_detected!("avx512f"),
            "avx512vl" => std::is_x86_feature_detected!("avx512vl"),
            "avx512vbmi" => std::is_x86_feature_detected!("avx512vbmi"),
            "lzcnt" => std::is_x86_feature_detected!("lzcnt"),
            _ => false,
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = name;
        false
    }
}
