//! The native side: GMAC/s of each shape, one thread.
fn main() {
    let mut cells = Vec::new();
    for (m, k, n) in gemm_bench::SHAPES {
        gemm_bench::setup(m, k, n);
        gemm_bench::multiply(m, k, n, 2);
        let reps = 10;
        let t = std::time::Instant::now();
        gemm_bench::multiply(m, k, n, reps);
        let seconds = t.elapsed().as_secs_f64() / reps as f64;
        cells.push(format!("{:.1}", (m * k * n) as f64 / seconds / 1e9));
    }
    println!("{}", cells.join(" | "));
}
