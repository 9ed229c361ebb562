//! The native CLI end to end: `logits` writes HF's logits as a standard .npy, `generate`
//! prints HF's greedy continuation, and mistakes are clear errors. Needs `--features cli`.
#![cfg(all(not(target_arch = "wasm32"), feature = "cli"))]

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::{assert_close, fixtures};

#[path = "../src/bin/webmamba/default_model.rs"]
mod default_model;

fn fixture_dir(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

fn webmamba(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_webmamba")).args(args).output().expect("run webmamba")
}

/// Parses a 2-D little-endian f32 .npy (version 1.0) into (shape, data).
fn read_npy(bytes: &[u8]) -> ((usize, usize), Vec<f32>) {
    assert_eq!(&bytes[..8], b"\x93NUMPY\x01\x00", "npy magic and version");
    let header_len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    assert_eq!((10 + header_len) % 64, 0, "npy header is padded to 64 bytes");
    let header = std::str::from_utf8(&bytes[10..10 + header_len]).unwrap();
    assert!(header.contains("'descr': '<f4'") && header.contains("'fortran_order': False"), "{header}");
    let shape = header.split("'shape': (").nth(1).unwrap().split(')').next().unwrap();
    let dims: Vec<usize> =
        shape.split(',').filter(|s| !s.trim().is_empty()).map(|s| s.trim().parse().unwrap()).collect();
    ((dims[0], dims[1]), bytemuck::pod_collect_to_vec(&bytes[10 + header_len..]))
}

#[test]
fn logits_command_writes_hf_logits_as_npy_on_both_backends() {
    let tmp = std::env::temp_dir().join(format!("webmamba-cli-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    for backend in ["cpu", "gpu"] {
        for f in fixtures::all() {
            let r = f.reference();
            let ids = r.ids.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
            let out = tmp.join(format!("{}-{backend}.npy", f.name));
            let dir = fixture_dir(f.name);
            // GPU weights in the format that holds the file exactly: f16 (the default) for
            // f16/bf16 files, f32 for f32 files.
            let f32_file = f.checkpoint().layout.planned().any(|p| p.dtype == safetensors::Dtype::F32);
            let weights = if f32_file { "f32" } else { "f16" };
            let run = webmamba(&[
                "logits",
                "--model",
                dir.to_str().unwrap(),
                "--ids",
                &ids,
                "--backend",
                backend,
                "--weights",
                weights,
                "--out",
                out.to_str().unwrap(),
            ]);
            assert!(run.status.success(), "{} {backend}: {}", f.name, String::from_utf8_lossy(&run.stderr));
            let ((rows, cols), data) = read_npy(&std::fs::read(&out).unwrap());
            assert_eq!((rows, cols), (r.ids.len(), r.logits.len() / r.ids.len()), "{}", f.name);
            assert_close(&format!("{} ({backend}): CLI logits vs HF", f.name), &data, &r.logits, 1e-4, 0.0);
        }
    }
    std::fs::remove_dir_all(&tmp).unwrap();
}

#[test]
fn generate_command_prints_the_hf_greedy_continuation_on_both_backends() {
    let f = fixtures::all().into_iter().find(|f| f.name == "medium-bf16").unwrap();
    let r = f.reference();
    let tok = webmamba::Tokenizer::from_bytes(f.tokenizer).unwrap();
    let expected = format!("Once upon a time{}\n", tok.decode(&r.greedy_ids, true).unwrap());
    let dir = fixture_dir(f.name);
    let n = r.greedy_ids.len().to_string();
    for backend in ["cpu", "gpu"] {
        let run = webmamba(&[
            "generate",
            "--model",
            dir.to_str().unwrap(),
            "--prompt",
            "Once upon a time",
            "--max-tokens",
            &n,
            "--backend",
            backend,
        ]);
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        assert_eq!(String::from_utf8(run.stdout).unwrap(), expected, "{backend}");
    }
}

#[test]
fn bench_reports_both_backends_side_by_side() {
    let dir = fixture_dir("medium-bf16");
    let run = webmamba(&[
        "bench",
        "--model",
        dir.to_str().unwrap(),
        "--prompt-tokens",
        "40",
        "--decode-tokens",
        "3",
        "--compare-subgroups",
    ]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let out = String::from_utf8(run.stdout).unwrap();
    assert!(
        out.contains("| cpu |") && out.contains("| gpu |") && out.contains("gpu/cpu speed ratio"),
        "{out}"
    );
    assert!(out.contains("| gpu-no-subgroups |"), "--compare-subgroups adds the tree's row: {out}");
}

/// The suite's JSON has every figure for every backend (values are not judged here: numbers
/// live in benchmarks); the run itself checks that the follow-up resumed from its checkpoint.
#[test]
fn bench_suite_prints_one_json_object_with_every_figure() {
    let dir = fixture_dir("tiny-f32");
    let args = ["bench", "--suite", "--json", "--runs", "1", "--formats", "f16,int8", "--model"];
    let run = webmamba(&[&args[..], &[dir.to_str().unwrap()]].concat());
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let report: serde_json::Value = serde_json::from_slice(&run.stdout).expect("one JSON object");
    let number = |v: &serde_json::Value, what: &str| {
        let x = v.as_f64().unwrap_or_else(|| panic!("{what} is not a number: {v}"));
        assert!(x.is_finite(), "{what} = {x}");
        x
    };
    for backend in ["cpu", "gpu-f16", "gpu-int8"] {
        for n in ["128", "512", "2048"] {
            assert!(number(&report["prefill_tok_s"][backend][n]["median"], "prefill") > 0.0, "{backend} {n}");
        }
        assert!(number(&report["decode_tok_s"][backend]["median"], "decode") > 0.0);
        assert!(number(&report["scan_speedup_512"][backend], "scan_speedup_512") > 0.0);
        assert!(number(&report["resume_speedup_2048"][backend], "resume_speedup_2048") > 0.0);
        number(&report["capture_overhead_512"][backend], "capture_overhead_512");
        let stat = &report["backends"][backend]["decode_tok_s"];
        assert!(number(&stat["min"], "min") <= number(&stat["max"], "max"));
        let per_token = &report["decode_per_token_tok_s"][backend];
        let dispatches = &report["dispatches_per_token"][backend];
        if backend == "cpu" {
            assert!(report["record_us_per_dispatch"][backend].is_null(), "the CPU records nothing");
            assert!(report["dispatch_times"][backend].is_null(), "the CPU dispatches nothing");
            assert!(per_token.is_null(), "the CPU decodes token by token only");
            assert!(dispatches.is_null(), "the CPU dispatches nothing");
        } else {
            assert!(number(&per_token["median"], "decode_per_token") > 0.0);
            // Counted, not timed: every token records the same dispatches. A Mamba-1 layer's
            // fused decode step is 4 (decode_in_proj, x_proj, decode_scan, out_proj; unfused it
            // was 7), and the token adds the embedding and norm_f + the LM head (one fused
            // decode_in_proj; unfused two): 4 · layers + 2.
            let layers = report["model"]["n_layer"].as_f64().expect("n_layer");
            let d = number(dispatches, "dispatches_per_token");
            eprintln!("{backend}: {d} dispatches per token ({layers} layers)");
            assert_eq!(d, 4.0 * layers + 2.0, "{backend}: dispatches per token");
            // One decode step stamped per dispatch (lavapipe has timestamps inside passes): its
            // kernels' dispatches add up to the count above, and they ran for some time.
            let timed = &report["dispatch_times"][backend];
            let kernels =
                timed["kernels"].as_array().unwrap_or_else(|| panic!("{backend}: dispatch_times {timed}"));
            let stamped: f64 = kernels.iter().map(|k| number(&k["dispatches"], "dispatches")).sum();
            assert_eq!(stamped, d, "{backend}: stamped dispatches per step {timed}");
            let busy: f64 = kernels.iter().map(|k| number(&k["busy_us"], "busy_us")).sum();
            assert!(busy > 0.0 && number(&timed["span_us"], "span_us") >= busy * 0.99, "{backend}: {timed}");
            // The CPU's part of a greedy batch, timed alone: positive and finite.
            for key in ["record_us_per_dispatch", "record_share_of_decode"] {
                let v = number(&report[key][backend]["median"], key);
                assert!(v > 0.0 && v.is_finite(), "{backend}: {key} {v}");
            }
        }
    }
    assert!(report["gpu_memory_bytes"]["cpu"].is_null());
    // The GPU's prefill matmul alone, on the model's largest layer matrix (tiny-f32's in_proj).
    assert_eq!(report["gemm_shape"], serde_json::json!({ "rows": 512, "k": 16, "n": 64 }), "{report}");
    assert!(report["gemm_gflop_s"]["cpu"].is_null());
    for backend in ["gpu-f16", "gpu-int8"] {
        let gemm = &report["gemm_gflop_s"][backend];
        assert!(number(&gemm["median"], "gemm_gflop_s") > 0.0, "{backend}: {gemm}");
        assert_eq!(gemm, &report["backends"][backend]["gemm_gflop_s"]);
    }
    // the CPU's pool: every core by default; nothing on the GPU
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert_eq!(report["cpu_threads"]["cpu"], cores, "{report}");
    assert!(report["cpu_threads"]["gpu-f16"].is_null());
    // The GEMV kernels' sums: lavapipe has subgroups, but Matmul::Auto gives it the software
    // adapters' kernels, which sum without crossing invocations.
    assert!(report["subgroups"]["cpu"].is_null());
    assert_eq!(report["subgroups"]["gpu-f16"], false, "{report}");
    let (f16, int8) = (&report["gpu_memory_bytes"]["gpu-f16"], &report["gpu_memory_bytes"]["gpu-int8"]);
    assert!(number(&int8["weights"], "weights") < number(&f16["weights"], "weights"), "{report}");
}

#[test]
fn cli_mistakes_are_clear_errors() {
    let dir = fixture_dir("tiny-f32");
    let missing = webmamba(&["generate", "--model", "/nonexistent/model", "--prompt", "x"]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("/nonexistent/model"));

    for backend in ["cpu", "gpu"] {
        let bad_id = webmamba(&[
            "logits",
            "--model",
            dir.to_str().unwrap(),
            "--ids",
            "1,99999",
            "--backend",
            backend,
            "--out",
            "/dev/null",
        ]);
        assert!(!bad_id.status.success());
        assert!(String::from_utf8_lossy(&bad_id.stderr).contains("outside the vocabulary"), "{backend}");
    }

    // a thread count of 0 (or past 256) is refused by the parser, before anything loads
    for threads in ["0", "257"] {
        let run =
            webmamba(&["generate", "--model", dir.to_str().unwrap(), "--prompt", "x", "--threads", threads]);
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(!run.status.success() && stderr.contains("--threads"), "{threads}: {stderr}");
    }

    // replay: an id past u32 is refused, not wrapped to 0 (4294967296 used to run as id 0).
    let ops = std::env::temp_dir().join(format!("webmamba-replay-bad-{}.json", std::process::id()));
    std::fs::write(&ops, r#"[{"append": [1, 4294967296]}]"#).unwrap();
    let wrapped = webmamba(&["replay", "--model", dir.to_str().unwrap(), "--ops", ops.to_str().unwrap()]);
    std::fs::remove_file(&ops).unwrap();
    let stderr = String::from_utf8_lossy(&wrapped.stderr);
    assert!(!wrapped.status.success() && stderr.contains("4294967296"), "{stderr}");
}

#[test]
fn replay_reports_prefills_resumes_and_checkpoints() {
    let dir = fixture_dir("medium-bf16");
    let ops = std::env::temp_dir().join(format!("webmamba-replay-{}.json", std::process::id()));
    std::fs::write(
        &ops,
        r#"[{"append": [1,2,3,4,5,6,7,8,9,10,11,12,13]}, {"generate": 5}, {"new_session": true},
            {"append": [1,2,3,4,5,6,7,8,9,10,11,12,13]}, {"append": [40, 41]}, {"rewind": 13},
            {"generate": 5}, {"rewind": 9}]"#,
    )
    .unwrap();
    let mut outputs = Vec::new();
    for backend in ["cpu", "gpu"] {
        let run = webmamba(&[
            "replay",
            "--model",
            dir.to_str().unwrap(),
            "--ops",
            ops.to_str().unwrap(),
            "--block-size",
            "4",
            "--retention",
            "sparse:2",
            "--backend",
            backend,
        ]);
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        let lines: Vec<serde_json::Value> = String::from_utf8(run.stdout)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 8);
        let field = |i: usize, k: &str| lines[i][k].clone();
        // First prompt: 13 tokens from zeros; sparse:2 keeps boundary 8, plus the prompt end 13.
        assert_eq!((field(0, "prefilled"), field(0, "resumed_from")), (13.into(), serde_json::Value::Null));
        assert_eq!(field(0, "checkpoints"), serde_json::json!([8, 13]));
        assert_eq!(field(1, "ids").as_array().unwrap().len(), 5);
        // A new session resending the prompt: nothing prefilled, resumed from the prompt end.
        assert_eq!((field(3, "prefilled"), field(3, "resumed_from")), (0.into(), 13.into()));
        assert_eq!(field(4, "prefilled"), 2);
        // Rewinding to the prompt end and generating again reproduces the first generation.
        assert_eq!((field(5, "prefilled"), field(5, "resumed_from")), (0.into(), 13.into()));
        assert_eq!(field(6, "ids"), field(1, "ids"));
        // Rewinding to 9: the nearest kept checkpoint at or before it is 8; one token re-runs.
        assert_eq!((field(7, "prefilled"), field(7, "resumed_from")), (1.into(), 8.into()));
        outputs.push(lines.iter().map(|l| l["ids"].clone()).collect::<Vec<_>>());
    }
    assert_eq!(outputs[0], outputs[1], "CPU and GPU generate the same tokens");
    std::fs::remove_file(ops).unwrap();
}

/// `--max-context` and `--kv-format` reach a hybrid's attention caches: past the limit is a
/// clear error on both backends; f16 caches move the logits a little (so the flag is not
/// ignored) and keep them near the f32 caches'; f16 on the CPU is refused by name.
#[test]
fn context_flags_reach_a_hybrids_caches() {
    let f = fixtures::hybrids().into_iter().find(|f| f.name == "granite-h-rope-moe-f32").unwrap();
    let dir = fixture_dir(f.name);
    let r = f.reference();
    let ids = r.ids[..80].iter().map(u32::to_string).collect::<Vec<_>>().join(",");
    let tmp = std::env::temp_dir().join(format!("webmamba-cli-context-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let run = |backend: &str, extra: &[&str], out: &str| {
        let out = tmp.join(out);
        let mut args = vec!["logits", "--model", dir.to_str().unwrap(), "--ids", &ids, "--backend", backend];
        args.extend_from_slice(&["--weights", "f32", "--out", out.to_str().unwrap()]);
        args.extend_from_slice(extra);
        (webmamba(&args), out)
    };
    for backend in ["cpu", "gpu"] {
        let (full, _) = run(backend, &["--max-context", "64"], "full.npy");
        let stderr = String::from_utf8_lossy(&full.stderr);
        assert!(
            !full.status.success() && stderr.contains("maxContext is 64"),
            "{backend}: 80 tokens past 64: {stderr}"
        );
        let (fits, _) = run(backend, &["--max-context", "80"], "fits.npy");
        assert!(fits.status.success(), "{backend}: {}", String::from_utf8_lossy(&fits.stderr));
    }
    let (exact, exact_out) = run("gpu", &[], "f32.npy");
    let (half, half_out) = run("gpu", &["--kv-format", "f16"], "f16.npy");
    assert!(exact.status.success() && half.status.success(), "{}", String::from_utf8_lossy(&half.stderr));
    let (_, a) = read_npy(&std::fs::read(exact_out).unwrap());
    let (_, b) = read_npy(&std::fs::read(half_out).unwrap());
    let worst = a.iter().zip(&b).map(|(x, y)| (x - y).abs()).fold(0.0f32, f32::max);
    assert!(worst > 0.0 && worst < 1e-2, "f16 vs f32 key/value caches: max |diff| {worst:e}");
    let (cpu_half, _) = run("cpu", &["--kv-format", "f16"], "cpu-f16.npy");
    let stderr = String::from_utf8_lossy(&cpu_half.stderr);
    assert!(!cpu_half.status.success() && stderr.contains("--kv-format f16 needs --backend gpu"), "{stderr}");
    std::fs::remove_dir_all(&tmp).unwrap();
}

/// Two processes, one `--store DIR` (issue 28): the second reading the same prompt and a
/// follow-up prefills only the follow-up and generates what an uncached run generates; a
/// shorter prefix resumes from a stored block checkpoint (with its key/value pages); damaged
/// or foreign records are misses that are removed (the tokens are read again, the same ones
/// come out); `--store-clear` removes the records and nothing else. A hybrid (Jamba), both
/// backends.
#[test]
fn processes_share_checkpoints_through_a_store_folder() {
    let tmp = std::env::temp_dir().join(format!("webmamba-store-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    let (store, model) = (tmp.join("store"), fixture_dir("jamba-moe-bf16"));
    let prompt: Vec<u32> = (0..150u32).map(|i| (i * 7 + 3) % 250 + 2).collect();
    let write_ops = |name: &str, ops: serde_json::Value| {
        let path = tmp.join(name);
        std::fs::write(&path, ops.to_string()).unwrap();
        path
    };
    let first = write_ops("first.json", serde_json::json!([{ "append": prompt }, { "generate": 6 }]));
    let second = write_ops(
        "second.json",
        serde_json::json!([{ "append": prompt }, { "append": [5, 6, 7] }, { "generate": 6 }]),
    );
    let shorter =
        write_ops("shorter.json", serde_json::json!([{ "append": prompt[..100] }, { "generate": 6 }]));
    let replay = |ops: &PathBuf, backend: &str, extra: &[&str]| -> (Vec<serde_json::Value>, String) {
        let mut args = vec!["replay", "--model", model.to_str().unwrap(), "--ops", ops.to_str().unwrap()];
        args.extend(["--block-size", "16", "--backend", backend]);
        args.extend(extra);
        let run = webmamba(&args);
        let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
        assert!(run.status.success(), "{stderr}");
        let stdout = String::from_utf8(run.stdout).unwrap();
        (stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect(), stderr)
    };
    let records = || -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(&store).unwrap().map(|e| e.unwrap().path()).collect();
        v.retain(|p| p.extension().is_some_and(|e| e == "wmrec"));
        v
    };
    let s = store.to_str().unwrap();
    for backend in ["cpu", "gpu"] {
        let (uncached, _) = replay(&second, backend, &[]);
        let (uncached_short, _) = replay(&shorter, backend, &[]);
        replay(&first, backend, &["--store", s, "--store-clear", "--store-sparse-every", "2"]);
        std::fs::write(store.join("keep.txt"), "not a record").unwrap();
        let (lines, _) = replay(&second, backend, &["--store", s]);
        assert_eq!(
            (&lines[0]["prefilled"], &lines[0]["from_store"]),
            (&0.into(), &true.into()),
            "{backend}: {lines:?}"
        );
        assert_eq!(lines[1]["prefilled"], 3, "{backend}: only the follow-up");
        assert_eq!(lines[2]["ids"], uncached[2]["ids"], "{backend}: the uncached run's tokens");
        // 100 tokens: the stored block at 96 (every 2nd of 16), its 6 pages, 4 tokens read.
        let (lines, _) = replay(&shorter, backend, &["--store", s]);
        assert_eq!(
            (&lines[0]["prefilled"], &lines[0]["resumed_from"]),
            (&4.into(), &96.into()),
            "{backend}: {lines:?}"
        );
        assert_eq!(lines[1]["ids"], uncached_short[1]["ids"], "{backend}: from a stored block");
        // Every checkpoint record damaged (one byte), then every one of another model.
        for damage in ["damaged", "foreign"] {
            for path in records().into_iter().filter(|p| p.to_str().unwrap().contains("/ckpt-")) {
                let mut bytes = std::fs::read(&path).unwrap();
                match damage {
                    "damaged" => bytes[100] ^= 1,
                    _ => bytes[13] ^= 1, // the fingerprint; then a checksum that matches again
                }
                if damage == "foreign" {
                    let end = bytes.len() - 32;
                    let sum = *blake3::hash(&bytes[..end]).as_bytes();
                    bytes[end..].copy_from_slice(&sum);
                }
                std::fs::write(&path, bytes).unwrap();
            }
            let (lines, stderr) = replay(&second, backend, &["--store", s]);
            assert_eq!(lines[0]["prefilled"], 150, "{backend}: a {damage} record is a miss: {lines:?}");
            assert!(stderr.contains("removed"), "{backend}: {damage}: {stderr}");
            assert_eq!(lines[2]["ids"], uncached[2]["ids"], "{backend}: {damage}: the same tokens");
        }
        replay(&first, backend, &["--store", s, "--store-clear"]);
        let (lines, _) = replay(&first, backend, &["--store", s, "--store-clear"]);
        assert_eq!(lines[0]["prefilled"], 150, "{backend}: cleared");
        assert!(store.join("keep.txt").exists(), "{backend}: --store-clear removes records only");
    }
    std::fs::remove_dir_all(&tmp).unwrap();
}

/// `perplexity` against the convention computed here from the CPU reference's logits: windows
/// of `--context` tokens from a fresh state, the rows from context / 2 on scored (each predicting
/// the next token of its window), exp of the mean negative log-likelihood; on the GPU the
/// f32 and f16 weights of the default model (a bf16 checkpoint) give the same figure closely.
#[test]
fn perplexity_command_scores_the_second_half_of_each_window() {
    use webmamba::{Engine, Logits, Tokenizer};
    let text =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("www/models/shakespeare-mamba-3m/heldout-tempest.txt");
    let context = 384;
    let c = default_model::checkpoint().unwrap();
    let tokens = Tokenizer::from_bytes(c.tokenizer_json.as_deref().unwrap())
        .unwrap()
        .encode(&std::fs::read_to_string(&text).unwrap(), false)
        .unwrap();
    let vocab = c.config.vocab_size;
    let mut e = Engine::cpu(c.weights().unwrap());
    let (mut nll, mut scored) = (0.0f64, 0usize);
    for window in tokens.chunks_exact(context) {
        e.reset();
        let logits = pollster::block_on(e.forward(&window[..context - 1], Logits::All)).unwrap();
        for (j, row) in logits.chunks_exact(vocab).enumerate().skip(context / 2) {
            let max = row.iter().cloned().fold(f32::MIN, f32::max) as f64;
            let log_sum = row.iter().map(|&v| (v as f64 - max).exp()).sum::<f64>().ln() + max;
            nll += log_sum - row[window[j + 1] as usize] as f64;
            scored += 1;
        }
    }
    let want = (nll / scored as f64).exp();
    let windows = tokens.len() / context;
    assert_eq!(scored, windows * (context - 1 - context / 2));
    let text = text.to_str().unwrap();
    for (backend, weights, tolerance) in [("cpu", "f32", 1e-9), ("gpu", "f32", 1e-5), ("gpu", "f16", 1e-5)] {
        let out = webmamba(&[
            "perplexity",
            "--text",
            text,
            "--context",
            &context.to_string(),
            "--backend",
            backend,
            "--weights",
            weights,
            "--json",
        ]);
        assert!(out.status.success(), "{backend}: {}", String::from_utf8_lossy(&out.stderr));
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let got = report["perplexity"].as_f64().unwrap();
        eprintln!(
            "[{}] {backend} {weights}: perplexity {got} (want {want}) over {scored} tokens",
            default_model::NAME
        );
        assert!((got / want - 1.0).abs() <= tolerance, "{backend} {weights}: perplexity {got}, want {want}");
        assert_eq!(report["scored_tokens"], scored, "{backend}");
        assert_eq!(report["windows"], windows, "{backend}");
        assert_eq!(report["per_window"].as_array().unwrap().len(), windows, "{backend}");
        assert!(report["uncertainty"].as_f64().unwrap() > 0.0, "{backend}");
    }
    // Mistakes: a window too small, a text too short for one window.
    let out = webmamba(&["perplexity", "--text", text, "--context", "2"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("use at least 4"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = webmamba(&["perplexity", "--text", text, "--context", "100000"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("fewer than one window"));
}

/// `webmamba chat` with stdin's lines as the messages (a ChatML template given by --template,
/// the embedded model): each turn's reply, and on stderr its counts — the second turn reads
/// only the template's glue and its message (counted from the format with the model's
/// tokenizer), the rest from the session's state; a model without a template and no
/// --template is refused with a clear message.
#[test]
fn chat_command_reads_only_each_turns_new_tokens() {
    use std::io::Write;
    let template = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/chat/chatml-qwen2.5-instruct.jinja");
    let mut child = Command::new(env!("CARGO_BIN_EXE_webmamba"))
        .args(["chat", "--template", template, "--system", "You are a player.", "--max-tokens", "8"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"Good morrow.\n\nWhat news?\n/exit\nnot read\n").unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // "[P prompt tokens, R prefilled, C from the session's state; G generated]" per turn.
    let counts: Vec<Vec<usize>> = stderr
        .lines()
        .filter(|l| l.starts_with('['))
        .map(|l| l.split(|c: char| !c.is_ascii_digit()).filter_map(|n| n.parse().ok()).collect())
        .collect();
    assert_eq!(counts.len(), 2, "two turns (the empty line skipped, /exit ends it): {stderr}");
    let tokenizer =
        webmamba::Tokenizer::from_bytes(include_bytes!("../www/models/shakespeare-mamba-3m/tokenizer.json"))
            .unwrap();
    let glue = tokenizer
        .encode("<|im_end|>\n<|im_start|>user\nWhat news?<|im_end|>\n<|im_start|>assistant\n", false)
        .unwrap();
    let (first, second) = (&counts[0], &counts[1]);
    assert_eq!((first[1], first[2]), (first[0], 0), "turn 1 reads its whole prompt: {stderr}");
    assert_eq!(second[1], glue.len(), "turn 2 reads only its glue and message: {stderr}");
    assert_eq!(
        second[0],
        first[0] + first[3] + glue.len(),
        "the history is the prompt, the reply, the new tokens"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).trim().is_empty(), "the replies are printed");

    let refused = webmamba(&["chat"]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("no chat template"), "{:?}", refused);

    // --tools: the template lists them (a longer prompt), `/tool TEXT` answers as a tool
    // message and reads only its glue and result.
    let tools = std::env::temp_dir().join(format!("webmamba-chat-tools-{}.json", std::process::id()));
    std::fs::write(
        &tools,
        r#"[{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]"#,
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_webmamba"))
        .args(["chat", "--template", template, "--max-tokens", "8", "--tools"])
        .arg(&tools)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"Good morrow.\n/tool 21 degrees\n").unwrap();
    let out = child.wait_with_output().unwrap();
    std::fs::remove_file(&tools).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let with_tools: Vec<Vec<usize>> = stderr
        .lines()
        .filter(|l| l.starts_with("[") && l.contains("prefilled"))
        .map(|l| l.split(|c: char| !c.is_ascii_digit()).filter_map(|n| n.parse().ok()).collect())
        .collect();
    let answer = tokenizer
        .encode("<|im_end|>\n<|im_start|>user\n<tool_response>\n21 degrees\n</tool_response><|im_end|>\n<|im_start|>assistant\n", false)
        .unwrap();
    assert_eq!(with_tools.len(), 2, "{stderr}");
    assert!(with_tools[0][0] > first[0] + 50, "the tools are in the prompt: {stderr}");
    assert_eq!(with_tools[1][1], answer.len(), "/tool reads only its glue and result: {stderr}");
}

/// `webmamba chat --template` with a template that doubles a string forty times when the
/// message is "bomb" (issue 54), under a 1 GB address-space cap: that turn is a `Template`
/// error naming the memory limit (not an allocation failure, exit 134), the conversation goes
/// on and the next message gets its reply; the run ends with a clear error, within seconds.
#[cfg(target_os = "linux")]
#[test]
fn chat_template_memory_bomb_costs_one_message_under_a_1_gb_cap() {
    use std::io::Write;
    let chatml = include_str!("fixtures/chat/chatml-qwen2.5-instruct.jinja");
    let bomb = "{% if messages[-1].content == 'bomb' %}{% set ns = namespace(s='xxxxxxxx') %}\
                {% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}{% endif %}";
    let template = std::env::temp_dir().join(format!("webmamba-bomb-{}.jinja", std::process::id()));
    std::fs::write(&template, format!("{bomb}{chatml}")).unwrap();
    let started = std::time::Instant::now();
    let mut child = Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 1000000 && exec \"$0\" chat --template \"$1\" --max-tokens 4")
        .arg(env!("CARGO_BIN_EXE_webmamba"))
        .arg(&template)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"bomb\nGood morrow.\n").unwrap();
    let out = child.wait_with_output().unwrap();
    std::fs::remove_file(&template).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "a clean error exit, not an abort: {stderr}");
    assert!(stderr.contains("chat template line 1: template memory limit of "), "{stderr}");
    assert!(stderr.contains("the chat template refused 1 message(s)"), "{stderr}");
    assert_eq!(
        stderr.lines().filter(|l| l.starts_with('[')).count(),
        1,
        "the next message's turn ran: {stderr}"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).trim().is_empty(), "its reply is printed");
    assert!(started.elapsed().as_secs() < 30, "{:?}", started.elapsed());
}

/// `--model x.gguf`: a quantized file llama.cpp wrote, its logits within 1e-4 of HF running the
/// file's weights, on both backends (the GPU computing on the Q4_K/Q6_K blocks as stored).
#[test]
fn logits_command_reads_a_gguf_file_on_both_backends() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gguf");
    let st = std::fs::read(dir.join("mamba-d256-Q4_K_M.reference.safetensors")).unwrap();
    let st = safetensors::SafeTensors::deserialize(&st).unwrap();
    let ids: Vec<i32> = bytemuck::pod_collect_to_vec(st.tensor("ids").unwrap().data());
    let want: Vec<f32> = bytemuck::pod_collect_to_vec(st.tensor("logits").unwrap().data());
    let ids = ids.iter().map(i32::to_string).collect::<Vec<_>>().join(",");
    let tmp = std::env::temp_dir().join(format!("webmamba-cli-gguf-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    for backend in ["cpu", "gpu"] {
        let out = tmp.join(format!("{backend}.npy"));
        let model = dir.join("mamba-d256-Q4_K_M.gguf");
        let run = webmamba(&[
            "logits",
            "--model",
            model.to_str().unwrap(),
            "--ids",
            &ids,
            "--backend",
            backend,
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(run.status.success(), "{backend}: {}", String::from_utf8_lossy(&run.stderr));
        if backend == "gpu" {
            let said = String::from_utf8_lossy(&run.stderr);
            assert!(said.contains("(Q4_K+Q6_K)"), "the GPU computes on the file's blocks: {said}");
        }
        let (_, data) = read_npy(&std::fs::read(&out).unwrap());
        assert_close(
            &format!("mamba-d256-Q4_K_M.gguf ({backend}): CLI logits vs HF"),
            &data,
            &want,
            1e-4,
            0.0,
        );
    }
    std::fs::remove_dir_all(&tmp).unwrap();
}
