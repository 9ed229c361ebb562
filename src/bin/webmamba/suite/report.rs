//! The suite's output: the JSON report and the Markdown tables.

use serde_json::{Value, json};

use super::{PREFILL, Row, Stat};

/// The JSON report: every figure per backend, and the headline keys as backend → median.
pub(super) fn json(rows: &[Row], (model, gemm_shape): (Value, Value), adapter: &str, runs: usize) -> Value {
    let per = |f: &dyn Fn(&Row) -> Value| -> Value { rows.iter().map(|r| (r.label.clone(), f(r))).collect() };
    let prefill = |r: &Row| -> Value {
        PREFILL.iter().zip(&r.prefill).map(|(n, s)| (n.to_string(), s.json())).collect()
    };
    json!({
        "model": model,
        "adapter": adapter,
        "cpu_threads": per(&|r| r.cpu_threads.map_or(Value::Null, Value::from)),
        "runs": runs,
        "prefill_tok_s": per(&|r| prefill(r)),
        "decode_tok_s": per(&|r| r.decode.json()),
        "decode_per_token_tok_s": per(&|r| r.decode_per_token.as_ref().map_or(Value::Null, Stat::json)),
        "dispatches_per_token": per(&|r| r.dispatches_per_token.map_or(Value::Null, Value::from)),
        "scan_speedup_512": per(&|r| r.scan_speedup.median.into()),
        "resume_speedup_2048": per(&|r| r.resume_speedup.median.into()),
        "capture_overhead_512": per(&|r| r.capture_overhead.median.into()),
        "gpu_memory_bytes": per(&|r| r.memory.clone()),
        "gemm_shape": gemm_shape,
        "gemm_gflop_s": per(&|r| r.gemm.as_ref().map_or(Value::Null, Stat::json)),
        "record_us_per_dispatch": per(&|r| r.record.as_ref().map_or(Value::Null, |(us, _)| us.json())),
        "record_share_of_decode": per(&|r| r.record.as_ref().map_or(Value::Null, |(_, share)| share.json())),
        "dispatch_times": per(&|r| r.dispatch_times.as_ref().map_or(Value::Null, |d| d.json())),
        "subgroups": per(&|r| r.subgroups.map_or(Value::Null, Value::from)),
        "backends": per(&|r| json!({
            "prefill_tok_s": prefill(r), "decode_tok_s": r.decode.json(),
            "decode_per_token_tok_s": r.decode_per_token.as_ref().map_or(Value::Null, Stat::json),
            "scan_speedup_512": r.scan_speedup.json(), "resume_speedup_2048": r.resume_speedup.json(),
            "capture_overhead_512": r.capture_overhead.json(), "gpu_memory_bytes": r.memory,
            "gemm_gflop_s": r.gemm.as_ref().map_or(Value::Null, Stat::json) })),
    })
}

pub(super) fn table(rows: &[Row], (model, gemm): (&Value, &Value), adapter: &str, runs: usize) {
    println!("model {model}; adapter: {adapter}; median (min–max) of {runs} runs\n");
    println!(
        "| backend | prefill 128 tok/s | prefill 512 | prefill 2048 | decode tok/s | decode, per token | scan_speedup_512 | resume_speedup_2048 | capture_overhead_512 |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for r in rows {
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.label,
            r.prefill[0].cell(1),
            r.prefill[1].cell(1),
            r.prefill[2].cell(1),
            r.decode.cell(1),
            r.decode_per_token.as_ref().map_or("—".into(), |s| s.cell(1)),
            r.scan_speedup.cell(1),
            r.resume_speedup.cell(1),
            r.capture_overhead.cell(3)
        );
    }
    println!(
        "\n| backend | GEMM GFLOP/s ({} rows × K {} × N {}) | record µs/dispatch | record ÷ decode |\n|---|---|---|---|",
        gemm["rows"], gemm["k"], gemm["n"]
    );
    for r in rows {
        let (us, share) =
            r.record.as_ref().map_or(("—".into(), "—".into()), |(us, share)| (us.cell(2), share.cell(2)));
        println!("| {} | {} | {us} | {share} |", r.label, r.gemm.as_ref().map_or("—".into(), |s| s.cell(1)));
    }
    for r in rows {
        if let Some(d) = &r.dispatch_times {
            d.print(&r.label);
        }
    }
    let mb = |v: &Value| v.as_u64().map_or("—".into(), |b| format!("{:.1} MB", b as f64 / 1e6));
    println!(
        "\n| backend | GPU weights | activations | state | checkpoint slots | key/value caches | key/value pages |"
    );
    println!("|---|---|---|---|---|---|---|");
    for r in rows.iter().filter(|r| !r.memory.is_null()) {
        let m = &r.memory;
        println!(
            "| {} | {} | {} | {} | {} | {} | {} |",
            r.label,
            mb(&m["weights"]),
            mb(&m["activations"]),
            mb(&m["state"]),
            mb(&m["checkpoint_slots"]),
            mb(&m["kv_caches"]),
            mb(&m["kv_pages"])
        );
    }
}
