//! NumPy's `.npz` (`numpy.savez`): a zip archive with one `NAME.npy` member per array. The zip
//! is written by hand, which takes less code than a zip crate's build does: stored
//! (uncompressed, as `numpy.savez`) or deflated (`numpy.savez_compressed`, through
//! `miniz_oxide`). Reading takes stored and deflated members with their zip64 fields, as NumPy
//! writes them, and checks each member's CRC. A deflated member is inflated into a buffer of
//! the size the directory declares, allocated fallibly and only if deflate can reach that size
//! from the member's compressed bytes (at most 1032 to 1), so a hostile size cannot exhaust
//! memory.

use super::Stored;
use super::{
    assemble, assemble_all, data, named_arrays, npy, read_file, write_file, CheckpointError, Found,
    Result,
};
use crate::{Tensor, Tree};
use miniz_oxide::inflate::{decompress_slice_iter_to_slice, TINFLStatus};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::Path;

const FORMAT: &str = "npz";
const LOCAL: u32 = 0x0403_4b50;
const CENTRAL: u32 = 0x0201_4b50;
const END: u32 = 0x0605_4b50;
/// 1980-01-01, the earliest date a zip can hold (a fixed date keeps files reproducible).
const DOS_DATE: u16 = 0x21;
const STORED: u16 = 0;
const DEFLATED: u16 = 8;
/// The most bytes one deflated byte can expand to (a 258-byte match in 2 bits, 1032 to 1).
const MAX_DEFLATE_RATIO: u64 = 1032;
/// zlib's default level, which `numpy.savez_compressed` uses.
const DEFLATE_LEVEL: u8 = 6;

/// Saves every leaf of `tree` to an `.npz` file at `path` (`numpy.savez(path, **named)`), each
/// named by its path in the tree (replacing the file whole).
pub fn save_npz<T: Tree>(path: impl AsRef<Path>, tree: &T) -> Result<()> {
    write_file(path.as_ref(), &npz_to_bytes(tree)?)
}

/// [`save_npz`] with every member deflated (`numpy.savez_compressed`): smaller where values
/// repeat (zeros, integers), slower to write and read.
pub fn save_npz_compressed<T: Tree>(path: impl AsRef<Path>, tree: &T) -> Result<()> {
    write_file(path.as_ref(), &npz_compressed_to_bytes(tree)?)
}

/// Loads a tree shaped like `template` from the `.npz` file at `path`: the file must hold
/// exactly the template's arrays, with its dtypes and shapes.
pub fn load_npz<T: Tree>(path: impl AsRef<Path>, template: &T) -> Result<T> {
    npz_from_bytes(&read_file(path.as_ref())?, template)
}

/// Every array of the `.npz` file at `path`, by name, without a template (`numpy.load`).
pub fn read_npz(path: impl AsRef<Path>) -> Result<BTreeMap<String, Tensor>> {
    assemble_all(parse(&read_file(path.as_ref())?)?)
}

/// The `.npz` file [`save_npz`] writes, in memory.
pub fn npz_to_bytes<T: Tree>(tree: &T) -> Result<Vec<u8>> {
    archive(tree, STORED)
}

/// The `.npz` file [`save_npz_compressed`] writes, in memory.
pub fn npz_compressed_to_bytes<T: Tree>(tree: &T) -> Result<Vec<u8>> {
    archive(tree, DEFLATED)
}

/// A zip of every leaf's `.npy` file, its members stored or deflated (`method`).
fn archive<T: Tree>(tree: &T, method: u16) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    let arrays = named_arrays(tree)?;
    for (name, array) in &arrays {
        let mut member = npy::header(array.dtype(), array.dims());
        member.extend(data::encode(array));
        let file_name = format!("{name}.npy");
        let too_large = |what: &str| CheckpointError::Data {
            name: name.clone(),
            message: format!("{what} exceeds 4 GiB, which needs zip64 (save as safetensors)"),
        };
        let size = u32::try_from(member.len()).map_err(|_| too_large("the array"))?;
        let crc = crc32(&member);
        if method == DEFLATED {
            member = miniz_oxide::deflate::compress_to_vec(&member, DEFLATE_LEVEL);
        }
        let packed = u32::try_from(member.len()).map_err(|_| too_large("the array"))?;
        let offset = u32::try_from(out.len()).map_err(|_| too_large("the archive"))?;
        let name_len = u16::try_from(file_name.len()).map_err(|_| CheckpointError::Data {
            name: name.clone(),
            message: "the name is longer than a zip allows".into(),
        })?;
        // Version needed 2.0, no flags, the method, time 0, then crc and sizes.
        let common = |b: &mut Vec<u8>| {
            for v in [20u16, 0, method, 0, DOS_DATE] {
                b.extend(v.to_le_bytes());
            }
            for v in [crc, packed, size] {
                b.extend(v.to_le_bytes());
            }
            b.extend(name_len.to_le_bytes());
        };
        out.extend(LOCAL.to_le_bytes());
        common(&mut out);
        out.extend(0u16.to_le_bytes());
        out.extend(file_name.as_bytes());
        out.extend(&member);

        central.extend(CENTRAL.to_le_bytes());
        central.extend(20u16.to_le_bytes()); // made by: 2.0, MS-DOS
        common(&mut central);
        // Extra, comment, disk, internal and external attributes, then the local offset.
        for v in [0u16, 0, 0, 0, 0, 0] {
            central.extend(v.to_le_bytes());
        }
        central.extend(offset.to_le_bytes());
        central.extend(file_name.as_bytes());
    }
    let overflow = || CheckpointError::Data {
        name: "(archive)".into(),
        message: "more than a zip without zip64 holds (save as safetensors)".into(),
    };
    let count = u16::try_from(arrays.len()).map_err(|_| overflow())?;
    let central_offset = u32::try_from(out.len()).map_err(|_| overflow())?;
    let central_len = u32::try_from(central.len()).map_err(|_| overflow())?;
    out.extend(central);
    out.extend(END.to_le_bytes());
    out.extend([0u8; 4]); // this disk, the directory's disk
    for v in [count, count] {
        out.extend(v.to_le_bytes());
    }
    for v in [central_len, central_offset] {
        out.extend(v.to_le_bytes());
    }
    out.extend(0u16.to_le_bytes()); // comment length
    Ok(out)
}

/// [`load_npz`] from the bytes of a file.
pub fn npz_from_bytes<T: Tree>(bytes: &[u8], template: &T) -> Result<T> {
    assemble(template, parse(bytes)?)
}

/// Little-endian reads at offsets from a file, failing as truncation past its end.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn bytes(&self, at: u64, n: u64, what: &str) -> Result<&'a [u8]> {
        let range = usize::try_from(at).ok().and_then(|a| {
            let n = usize::try_from(n).ok()?;
            self.0.get(a..a.checked_add(n)?)
        });
        range.ok_or_else(|| CheckpointError::Truncated {
            format: FORMAT,
            what: format!(
                "{what} at byte {at} runs past the end ({} bytes)",
                self.0.len()
            ),
        })
    }

    fn u16(&self, at: u64, what: &str) -> Result<u16> {
        let b = self.bytes(at, 2, what)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    fn u32(&self, at: u64, what: &str) -> Result<u32> {
        let b = self.bytes(at, 4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&self, at: u64, what: &str) -> Result<u64> {
        let b = self.bytes(at, 8, what)?;
        Ok(u64::from_le_bytes([
            b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7],
        ]))
    }
}

fn bad(message: String) -> CheckpointError {
    CheckpointError::Header {
        format: FORMAT,
        message,
    }
}

/// The arrays of an archive, by name (member names without `.npy`).
fn parse(bytes: &[u8]) -> Result<BTreeMap<String, Found<'_>>> {
    let r = Reader(bytes);
    // The end record is the last 22 bytes, before a comment of at most 64 KiB.
    let len = bytes.len() as u64;
    let end = (0..=len.saturating_sub(22))
        .rev()
        .take(65536)
        .find(|&at| r.u32(at, "end record").ok() == Some(END))
        .ok_or_else(|| CheckpointError::Truncated {
            format: FORMAT,
            what: "no zip end-of-directory record (not a zip, or cut off)".into(),
        })?;
    let count = r.u16(end + 10, "entry count")?;
    let mut at = u64::from(r.u32(end + 16, "directory offset")?);
    if count == u16::MAX || at == u64::from(u32::MAX) {
        return Err(bad("a zip64 archive of over 65535 members or 4 GiB".into()));
    }
    let mut out = BTreeMap::new();
    for _ in 0..count {
        if r.u32(at, "directory entry")? != CENTRAL {
            return Err(bad(format!("no directory entry at byte {at}")));
        }
        let flags = r.u16(at + 8, "flags")?;
        let method = r.u16(at + 10, "method")?;
        let crc = r.u32(at + 16, "crc")?;
        let mut packed = u64::from(r.u32(at + 20, "size")?);
        let mut size = u64::from(r.u32(at + 24, "size")?);
        let name_len = u64::from(r.u16(at + 28, "name length")?);
        let extra_len = u64::from(r.u16(at + 30, "extra length")?);
        let comment_len = u64::from(r.u16(at + 32, "comment length")?);
        let mut local = u64::from(r.u32(at + 42, "local offset")?);
        let file_name = r.bytes(at + 46, name_len, "member name")?;
        let file_name = String::from_utf8_lossy(file_name).into_owned();
        let name = file_name
            .strip_suffix(".npy")
            .unwrap_or(&file_name)
            .to_string();
        // zip64: the fields set to all ones are in the extra block, in this order.
        let extra = r.bytes(at + 46 + name_len, extra_len, "extra field")?;
        let mut e = 0u64;
        while e + 4 <= extra_len {
            let (id, n) = (
                Reader(extra).u16(e, "extra")?,
                u64::from(Reader(extra).u16(e + 2, "extra")?),
            );
            if id == 1 {
                let mut f = e + 4;
                for field in [&mut size, &mut packed, &mut local] {
                    if *field == u64::from(u32::MAX) {
                        *field = Reader(extra).u64(f, "zip64 field")?;
                        f += 8;
                    }
                }
            }
            e += 4 + n;
        }
        at += 46 + name_len + extra_len + comment_len;

        let member_error = |message: &str| CheckpointError::Data {
            name: name.clone(),
            message: message.into(),
        };
        if flags & 1 != 0 {
            return Err(member_error("the member is encrypted"));
        }
        match method {
            STORED if packed != size => {
                return Err(member_error("a stored member whose sizes differ"))
            }
            STORED => {}
            DEFLATED if size / MAX_DEFLATE_RATIO > packed => {
                return Err(member_error(&format!(
                    "{packed} deflated bytes cannot inflate to the {size} the directory declares"
                )))
            }
            DEFLATED => {}
            m => return Err(member_error(&format!("unknown zip compression method {m}"))),
        }
        if r.u32(local, "local header")? != LOCAL {
            return Err(bad(format!("no local header for `{name}` at byte {local}")));
        }
        let skip = u64::from(r.u16(local.saturating_add(26), "name length")?)
            + u64::from(r.u16(local.saturating_add(28), "extra length")?);
        let start = local.saturating_add(30 + skip);
        let raw = r.bytes(start, packed, &format!("member `{file_name}`"))?;
        let member = match method {
            DEFLATED => Cow::Owned(inflate(&name, raw, size)?),
            _ => Cow::Borrowed(raw),
        };
        if crc32(&member) != crc {
            return Err(member_error("the member's CRC-32 does not match its data"));
        }
        if !file_name.ends_with(".npy") {
            return Err(CheckpointError::Extra { name: file_name });
        }
        let found = match member {
            Cow::Borrowed(member) => npy::parse(&name, member)?,
            Cow::Owned(member) => parse_owned(&name, member)?,
        };
        if out.insert(name.clone(), found).is_some() {
            return Err(bad(format!("two members named `{file_name}`")));
        }
    }
    Ok(out)
}

/// The `size` bytes that the raw deflate stream `packed` inflates to, or an error naming the
/// member (`name`) when the stream is corrupt or inflates to another size.
fn inflate(name: &str, packed: &[u8], size: u64) -> Result<Vec<u8>> {
    let error = |message: String| CheckpointError::Data {
        name: name.into(),
        message,
    };
    let mut out = Vec::new();
    usize::try_from(size)
        .ok()
        .and_then(|n| out.try_reserve_exact(n).ok().map(|()| n))
        .map(|n| out.resize(n, 0))
        .ok_or_else(|| CheckpointError::TooLarge {
            name: name.into(),
            bytes: size,
        })?;
    match decompress_slice_iter_to_slice(&mut out, std::iter::once(packed), false, true) {
        Ok(n) if n == out.len() => Ok(out),
        Ok(n) => Err(error(format!(
            "the member inflates to {n} bytes, the directory declares {size}"
        ))),
        Err(TINFLStatus::HasMoreOutput) => Err(error(format!(
            "the member inflates to more than the {size} bytes the directory declares"
        ))),
        Err(TINFLStatus::FailedCannotMakeProgress) => {
            Err(error("the member's deflate stream is cut off".into()))
        }
        Err(status) => Err(error(format!(
            "the member's deflate stream is corrupt ({status:?})"
        ))),
    }
}

/// The array of an inflated `.npy` member, owning its data: the bytes `npy::parse` borrows
/// are cut out of the member in place rather than copied.
fn parse_owned(name: &str, mut member: Vec<u8>) -> Result<Found<'static>> {
    let (dtype, shape, start, len) = match npy::parse(name, &member)? {
        Err(descr) => return Ok(Err(descr)),
        Ok(Stored {
            dtype,
            shape,
            data: Cow::Owned(data),
        }) => {
            return Ok(Ok(Stored {
                dtype,
                shape,
                data: Cow::Owned(data),
            }))
        }
        Ok(Stored {
            dtype,
            shape,
            data: Cow::Borrowed(data),
        }) => {
            // A subslice of `member`, so the difference of addresses is its offset.
            let start = data.as_ptr().addr() - member.as_ptr().addr();
            (dtype, shape, start, data.len())
        }
    };
    member.truncate(start + len);
    member.drain(..start);
    Ok(Ok(Stored {
        dtype,
        shape,
        data: Cow::Owned(member),
    }))
}

/// CRC-32 (IEEE, reflected), as zip uses.
fn crc32(bytes: &[u8]) -> u32 {
    const TABLE: [u32; 256] = {
        let mut table = [0u32; 256];
        let mut i = 0;
        while i < 256 {
            let mut c = i as u32;
            let mut k = 0;
            while k < 8 {
                c = if c & 1 != 0 {
                    0xEDB8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
                k += 1;
            }
            table[i] = c;
            i += 1;
        }
        table
    };
    !bytes.iter().fold(!0u32, |c, &b| {
        TABLE[((c ^ u32::from(b)) & 0xFF) as usize] ^ (c >> 8)
    })
}
