//! Which bytes of a safetensors file's data section a load reads: the runs of tensors the model
//! uses ([`Layout::roles`]), with the short gaps between them read through. A checkpoint may
//! hold much that the model does not use — Qwen3.5's Hub checkpoints keep a vision tower
//! (`model.visual.*`) and a multi-token-prediction head (`mtp.*`) in the same files as the text
//! model — and a long gap is skipped: the browser asks for each span with an HTTP Range request
//! (`crate::wasm::loader`), a folder is read with a seek ([`super::files`]). A gap is long when
//! it is at least [`MIN_GAP`] and at least [`LONG_GAP`] or an eighth of the data section: a
//! shorter one costs less read through than another request would.
//!
//! What is skipped is decided from the layout alone, so every source reads the same tensors:
//! the model's fingerprint takes the first bytes of the tensors inside the spans only
//! ([`super::stream::TensorStream`]), whichever way a file was read (skipped, or read through
//! because a server ignored Range or the caller's digest needs the whole file).

use std::ops::Range;

use crate::model::{FileHeader, Layout, Planned};

/// A gap of unused tensors at least this long is skipped (else it is read through)...
pub(crate) const LONG_GAP: u64 = 1 << 20;

/// ... and so is one at least an eighth of its file's data section (a small file's vision
/// tower), when it is at least this long.
pub(crate) const MIN_GAP: u64 = 4 << 10;

/// The spans of `header`'s data section (offsets within it, in order, disjoint) that hold every
/// tensor `roles` uses; a gap of unused bytes between, before or after them is left out when it
/// is long ([`is_long`]). A file the model uses nothing of has no span; one with no long gap
/// has one span, its whole data section.
pub(crate) fn spans(header: &FileHeader, roles: &[Option<Planned>]) -> Vec<Range<u64>> {
    let used = header.tensors.iter().zip(roles).filter(|(_, r)| r.is_some()).map(|(t, _)| t.start..t.end);
    runs(used, header.size - header.data_start)
}

/// [`spans`] of a data section of `len` bytes whose used tensors are `used` (in order).
fn runs(used: impl Iterator<Item = Range<u64>>, len: u64) -> Vec<Range<u64>> {
    let mut out: Vec<Range<u64>> = Vec::new();
    for t in used.filter(|t| t.end > t.start) {
        match out.last_mut() {
            Some(last) if !is_long(t.start.saturating_sub(last.end), len) => last.end = last.end.max(t.end),
            _ => out.push(t),
        }
    }
    if let Some(first) = out.first_mut().filter(|f| !is_long(f.start, len)) {
        first.start = 0;
    }
    if let Some(last) = out.last_mut().filter(|l| !is_long(len - l.end, len)) {
        last.end = len;
    }
    out
}

/// Whether a gap of `gap` unused bytes in a data section of `len` bytes is worth skipping.
pub(crate) fn is_long(gap: u64, len: u64) -> bool {
    gap >= MIN_GAP && (gap >= LONG_GAP || gap >= len / 8)
}

/// [`spans`] of every file of `layout`, by file.
pub(crate) fn layout_spans(layout: &Layout) -> Vec<Vec<Range<u64>>> {
    layout.files.iter().zip(&layout.roles).map(|(h, r)| spans(h, r)).collect()
}

/// Whether `spans` of a data section of `len` bytes cover all of it (one read, as before).
#[cfg(any(test, target_arch = "wasm32"))]
pub(crate) fn whole(spans: &[Range<u64>], len: u64) -> bool {
    len == 0 || (spans.len() == 1 && spans[0] == (0..len))
}

/// The bytes of a data section of `len` bytes that `spans` leave out.
#[cfg(any(test, target_arch = "wasm32"))]
pub(crate) fn skipped(spans: &[Range<u64>], len: u64) -> u64 {
    len - spans.iter().map(|s| s.end - s.start).sum::<u64>()
}

#[cfg(test)]
#[allow(clippy::single_range_in_vec_init)] // a list of one span
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    /// `runs` of tensors given as (start, end, used).
    fn of(tensors: &[(u64, u64, bool)], len: u64) -> Vec<Range<u64>> {
        runs(tensors.iter().filter(|t| t.2).map(|t| t.0..t.1), len)
    }

    #[test]
    fn a_file_used_whole_is_one_span() {
        let len = 64 * MIB;
        let spans = of(&[(0, 32 * MIB, true), (32 * MIB, len, true)], len);
        assert_eq!(spans, [0..len]);
        assert!(whole(&spans, len));
        assert_eq!(skipped(&spans, len), 0);
    }

    #[test]
    fn short_gaps_are_read_through_long_ones_skipped() {
        let len = 64 * MIB;
        let tensors = [
            (0, MIB, false),                   // a leading gap of 1 MiB: skipped
            (MIB, 10 * MIB, true),             //
            (10 * MIB, 10 * MIB + 512, false), // 512 bytes: read through
            (10 * MIB + 512, 20 * MIB, true),
            (20 * MIB, 40 * MIB, false), // the vision tower: skipped
            (40 * MIB, 63 * MIB, true),
            (63 * MIB, len, false), // 1 MiB at the end: skipped
        ];
        let spans = of(&tensors, len);
        assert_eq!(spans, [MIB..20 * MIB, 40 * MIB..63 * MIB]);
        assert!(!whole(&spans, len));
        assert_eq!(skipped(&spans, len), 22 * MIB);
    }

    #[test]
    fn a_gap_is_long_relative_to_a_small_file() {
        // 20 KiB of 136 KiB (more than an eighth): skipped; 3 KiB never is.
        assert_eq!(of(&[(0, 116 << 10, true), (116 << 10, 136 << 10, false)], 136 << 10), [0..116 << 10]);
        assert_eq!(of(&[(0, 8 << 10, true), (8 << 10, 11 << 10, false)], 11 << 10), [0..11 << 10]);
        // 100 KiB of a 64 MiB file: read through.
        let len = 64 * MIB;
        assert_eq!(
            of(&[(0, MIB, true), (MIB, MIB + (100 << 10), false), (MIB + (100 << 10), len, true)], len),
            [0..len]
        );
    }

    #[test]
    fn unused_files_and_empty_tensors() {
        assert_eq!(of(&[(0, 8 * MIB, false)], 8 * MIB), []);
        assert_eq!(of(&[], 0), []);
        assert!(whole(&[], 0));
        // An empty used tensor inside a long gap makes no span of its own.
        assert_eq!(of(&[(0, MIB, true), (MIB, 3 * MIB, false), (2 * MIB, 2 * MIB, true)], 3 * MIB), [0..MIB]);
    }
}
