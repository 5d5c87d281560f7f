//! Progress on stderr for long runs (drawn only on a terminal).

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A bar of `len` steps on stderr, labelled `msg`.
pub fn progress(len: u64, msg: &str) -> ProgressBar {
    let b = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr_with_hz(5));
    if let Ok(style) =
        ProgressStyle::with_template("{spinner} {msg} [{bar:30}] {pos}/{len} ({elapsed})")
    {
        b.set_style(style.progress_chars("=> "));
    }
    b.set_message(msg.to_string());
    b
}
