//! `y (m, n) = x (m, k) · wᵀ` with w (n, k) row-major, as webmamba's `linear` calls
//! matrixmultiply; exported for the wasm build (no imports: node times the calls).

use std::sync::Mutex;

/// x, w and y of the shape `setup` was last given.
static BUFFERS: Mutex<Vec<Vec<f32>>> = Mutex::new(Vec::new());

/// Fills x (m, k) and w (n, k) with values in [−1, 1] and zeroes y (m, n).
#[unsafe(no_mangle)]
pub extern "C" fn setup(m: usize, k: usize, n: usize) {
    let value = |i: usize, salt: usize| ((i * 7919 + salt * 104_729) % 2001) as f32 / 1000.0 - 1.0;
    let x = (0..m * k).map(|i| value(i, 1)).collect();
    let w = (0..n * k).map(|i| value(i, 2)).collect();
    *BUFFERS.lock().unwrap() = vec![x, w, vec![0.0; m * n]];
}

/// `reps` products of the buffers `setup(m, k, n)` made; returns one element of y.
#[unsafe(no_mangle)]
pub extern "C" fn multiply(m: usize, k: usize, n: usize, reps: usize) -> f32 {
    let mut buffers = BUFFERS.lock().unwrap();
    let [x, w, y] = &mut buffers[..] else { panic!("call setup first") };
    assert!(x.len() == m * k && w.len() == n * k && y.len() == m * n, "setup was for another shape");
    for _ in 0..reps {
        // SAFETY: x (m, k) strides (k, 1), wᵀ (k, n) strides (1, k), y (m, n) strides (n, 1):
        // every element addressed lies inside its buffer (asserted above).
        unsafe {
            matrixmultiply::sgemm(
                m,
                k,
                n,
                1.0,
                x.as_ptr(),
                k as isize,
                1,
                w.as_ptr(),
                1,
                k as isize,
                0.0,
                y.as_mut_ptr(),
                n as isize,
                1,
            );
        }
    }
    y[m * n / 2]
}

/// The prefill shapes of the 130M model, one forward chunk (256 tokens): in_proj, out_proj,
/// x_proj.
pub const SHAPES: [(usize, usize, usize); 3] = [(256, 768, 3072), (256, 1536, 768), (256, 1536, 80)];
