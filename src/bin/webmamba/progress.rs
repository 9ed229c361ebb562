//! A progress bar (indicatif, on stderr, drawn only when stderr is a terminal) over loading a
//! checkpoint: the bytes of its weights as they are converted and stored, then (GPU) the
//! kernels as they compile.

use std::collections::HashMap;

use indicatif::{ProgressBar, ProgressStyle};
use webmamba::{Checkpoint, Phase, Reporter};

/// Below this many bytes of weights, loading is quick: no bar.
const QUIET_BELOW: u64 = 64 << 20;

/// A [`Reporter`] that draws a bar for `checkpoint` (or nothing for a small one); with `gpu`,
/// the bar stays up while the kernels compile.
pub fn reporter(checkpoint: &Checkpoint, gpu: bool) -> Reporter {
    let total = checkpoint.layout.data_bytes();
    if total < QUIET_BELOW {
        return Reporter::silent();
    }
    let bar = ProgressBar::new(total).with_message("loading weights");
    bar.set_style(
        ProgressStyle::with_template("{msg:20} [{bar:40}] {bytes}/{total_bytes} ({bytes_per_sec}, {eta})")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    let mut per_file: HashMap<String, u64> = HashMap::new();
    Reporter::new(move |p| match p.phase {
        Phase::Upload => {
            per_file.insert(p.file.clone(), p.loaded);
            let done: u64 = per_file.values().sum();
            bar.set_position(done);
            if done == total && !gpu {
                bar.finish_and_clear();
            }
        }
        Phase::Compile => {
            bar.set_message("compiling kernels");
            if p.loaded == p.total {
                bar.finish_and_clear();
            }
        }
        Phase::Download => {}
    })
}
