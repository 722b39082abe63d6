//! Actor images: one actor captured between two messages, as bytes a host can store, ship and
//! restore: its module version, its incarnation's init, the core state of its instance
//! ([`crate::sandbox::image`]), its supervision strategy and each capability's bookkeeping.
//!
//! ```text
//! "MOTEIMG\0" | format: u16 LE | length: u32 LE | body (postcard) | crc32 of the body: u32 LE
//! ```
//!
//! Invariants:
//! - [`ActorImage::decode`] accepts only what [`ActorImage::encode`] wrote: the magic, the
//!   format, the length and the checksum are checked before the body is parsed, and a body
//!   that does not parse, or has bytes left over, is refused. It never panics.
//! - An image names the module version (name, version and content hash) it was taken from, and
//!   is restored only into that version.

use serde::{Deserialize, Serialize};

use super::supervisor::Strategy;
use crate::sandbox::image::{CoreImage, ImageError};

/// The first bytes of every image.
const MAGIC: &[u8; 8] = b"MOTEIMG\0";
/// The format this host writes and reads. 2: core state read through the snapshot shim
/// (slots of defined items only, no vector globals); images of format 1 are refused.
const FORMAT: u16 = 2;
/// Magic, format and length.
const HEADER: usize = MAGIC.len() + 2 + 4;

/// One actor, captured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct ActorImage {
    /// The module's name, version and content hash (SHA-256, hex).
    pub(crate) module: String,
    pub(crate) version: String,
    pub(crate) hash: String,
    /// Where it lived when captured.
    pub(crate) path: String,
    /// Its incarnation there.
    pub(crate) incarnation: u64,
    /// The init its incarnation was spawned with (a restart after a restore starts from it).
    pub(crate) init: Vec<u8>,
    /// How it supervises children.
    pub(crate) strategy: Strategy,
    /// Each capability's bookkeeping, by capability name, for those that keep any.
    pub(crate) caps: Vec<(String, Vec<u8>)>,
    /// The instance's core state.
    pub(crate) core: CoreImage,
}

impl ActorImage {
    /// The image as bytes.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let body = postcard::to_allocvec(self).unwrap_or_default();
        let mut out = Vec::with_capacity(HEADER + body.len() + 4);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&FORMAT.to_le_bytes());
        out.extend_from_slice(&(body.len() as u32).to_le_bytes());
        out.extend_from_slice(&body);
        out.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
        out
    }

    /// Reads an image from untrusted bytes.
    pub(crate) fn decode(bytes: &[u8]) -> Result<ActorImage, ImageError> {
        let corrupt = |why: &str| Err(ImageError::Corrupt(why.to_owned()));
        if bytes.len() < HEADER + 4 || &bytes[..MAGIC.len()] != MAGIC {
            return corrupt("not a Mote image");
        }
        let format = u16::from_le_bytes([bytes[8], bytes[9]]);
        if format != FORMAT {
            return Err(ImageError::Corrupt(format!(
                "image format {format}; this host reads format {FORMAT}"
            )));
        }
        let length = u32::from_le_bytes([bytes[10], bytes[11], bytes[12], bytes[13]]) as usize;
        if bytes.len() - HEADER - 4 != length {
            return corrupt("its length does not match its header (cut short, or extended)");
        }
        let body = &bytes[HEADER..HEADER + length];
        let tail = &bytes[HEADER + length..];
        let sum = u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]);
        if crc32fast::hash(body) != sum {
            return corrupt("its checksum does not match (damaged)");
        }
        match postcard::take_from_bytes::<ActorImage>(body) {
            Ok((image, [])) => Ok(image),
            Ok(_) => corrupt("bytes left over after its body"),
            Err(e) => Err(ImageError::Corrupt(format!("its body does not parse: {e}"))),
        }
    }

    /// The bytes of one capability's bookkeeping (empty if it kept none).
    pub(crate) fn cap(&self, name: &str) -> &[u8] {
        self.caps
            .iter()
            .find(|(n, _)| n == name)
            .map_or(&[], |(_, bytes)| bytes.as_slice())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::image::Base;

    fn image() -> ActorImage {
        ActorImage {
            module: "counter".into(),
            version: "1".into(),
            hash: "ab".repeat(32),
            path: "/user/c".into(),
            incarnation: 7,
            init: b"init".to_vec(),
            strategy: Strategy::default(),
            caps: vec![("delivery".into(), vec![1])],
            core: CoreImage {
                base: Base::Fresh,
                instances: 2,
                globals: Vec::new(),
                memories: Vec::new(),
                tables: Vec::new(),
            },
        }
    }

    #[test]
    fn an_image_reads_back_as_written() {
        let bytes = image().encode();
        assert_eq!(ActorImage::decode(&bytes).unwrap(), image());
        assert_eq!(image().cap("delivery"), &[1]);
        assert_eq!(image().cap("timers"), &[] as &[u8]);
    }

    #[test]
    fn every_damaged_byte_and_every_cut_is_refused() {
        let bytes = image().encode();
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x41;
            assert!(
                matches!(ActorImage::decode(&bad), Err(ImageError::Corrupt(_))),
                "byte {i} flipped"
            );
            assert!(
                matches!(ActorImage::decode(&bytes[..i]), Err(ImageError::Corrupt(_))),
                "cut at {i}"
            );
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(ActorImage::decode(&longer).is_err());
        assert!(ActorImage::decode(b"").is_err());
    }

    #[test]
    fn an_image_of_the_guest_debug_format_is_refused_by_its_number() {
        let mut old = image().encode();
        old[8..10].copy_from_slice(&1u16.to_le_bytes());
        let refused = ActorImage::decode(&old);
        assert!(
            matches!(&refused, Err(ImageError::Corrupt(why)) if why.contains("image format 1")),
            "{refused:?}"
        );
    }
}
