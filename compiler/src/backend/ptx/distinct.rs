//! Entries rendered once: a program's repeated layers make the same kernels over and over
//! (GPT-2's twelve blocks, their gradients, each parameter's optimizer update), which differ
//! only in their names. The driver (or `ptxas`) compiles every entry of a module, so each
//! repeat would cost compile time and module size for nothing; launches of a repeated entry
//! launch the first instead.

use std::collections::HashMap;

/// `pieces` (each an entry text with its entry points, as [`super::render_pieces`] makes
/// them), named `names` (per piece, its entry points' names), without those identical to an
/// earlier one but for their names; and, for each name dropped, the name whose entry it is.
pub fn distinct_entries(
    pieces: Vec<(String, usize)>,
    names: &[Vec<String>],
) -> (Vec<(String, usize)>, HashMap<String, String>) {
    let mut first: HashMap<String, usize> = HashMap::with_capacity(pieces.len());
    let mut kept = Vec::with_capacity(pieces.len());
    let mut renamed = HashMap::new();
    for (piece, (text, entries)) in pieces.into_iter().enumerate() {
        let Some(own) = names.get(piece) else {
            kept.push((text, entries));
            continue;
        };
        let key = unnamed(&text, own);
        match first.get(&key) {
            Some(&earlier) => {
                let theirs = &names[earlier];
                for (mine, theirs) in own.iter().zip(theirs) {
                    renamed.insert(mine.clone(), theirs.clone());
                }
            }
            None => {
                first.insert(key, piece);
                kept.push((text, entries));
            }
        }
    }
    (kept, renamed)
}

/// `text` with each of `names` replaced by a mark of its place (longest first, so no name is
/// replaced inside a longer one): equal for two entries that differ only in their names.
fn unnamed(text: &str, names: &[String]) -> String {
    let mut order: Vec<usize> = (0..names.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(names[i].len()));
    let mut key = text.to_string();
    for i in order {
        key = key.replace(&names[i], &format!("\u{1}{i}\u{1}"));
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, body: &str) -> String {
        format!(".visible .entry {name}(\n\t.param .u64 {name}_param_0\n)\n{{\n{body}\n}}\n")
    }

    #[test]
    fn entries_identical_but_for_their_names_are_kept_once() {
        let pieces = vec![
            (entry("f_k1", "ret;"), 1),
            (entry("f_k2", "exit;"), 1),
            (entry("f_k10", "ret;"), 1),
            (entry("f_k11", "exit;"), 1),
        ];
        let names: Vec<Vec<String>> = ["f_k1", "f_k2", "f_k10", "f_k11"]
            .iter()
            .map(|n| vec![n.to_string()])
            .collect();
        let (kept, renamed) = distinct_entries(pieces, &names);
        assert_eq!(kept.len(), 2);
        assert!(kept[0].0.contains("f_k1(") && kept[1].0.contains("f_k2("));
        assert_eq!(renamed.len(), 2);
        assert_eq!(renamed["f_k10"], "f_k1");
        assert_eq!(renamed["f_k11"], "f_k2");
    }

    #[test]
    fn entries_that_differ_beyond_their_names_are_all_kept() {
        let pieces = vec![
            (entry("f_k1", "mov.u32 %r1, 1;"), 1),
            (entry("f_k2", "mov.u32 %r1, 2;"), 1),
        ];
        let names = vec![vec!["f_k1".to_string()], vec!["f_k2".to_string()]];
        let (kept, renamed) = distinct_entries(pieces, &names);
        assert_eq!(kept.len(), 2);
        assert!(renamed.is_empty());
    }

    #[test]
    fn a_piece_of_several_entries_maps_each_to_its_counterpart() {
        let two = |a: &str, b: &str| format!("{}{}", entry(a, "ret;"), entry(b, "exit;"));
        let pieces = vec![
            (two("s0_rank", "s0_move"), 2),
            (two("s1_rank", "s1_move"), 2),
        ];
        let names = vec![
            vec!["s0_rank".to_string(), "s0_move".to_string()],
            vec!["s1_rank".to_string(), "s1_move".to_string()],
        ];
        let (kept, renamed) = distinct_entries(pieces, &names);
        assert_eq!(kept.len(), 1);
        assert_eq!(renamed["s1_rank"], "s0_rank");
        assert_eq!(renamed["s1_move"], "s0_move");
    }
}
