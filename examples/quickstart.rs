//! The README's Rust quick start: the embedded model continues a prompt on the CPU reference
//! (`Engine::gpu(&GpuContext::new().await?, &checkpoint, Default::default()).await?` for WebGPU),
//! through a session of the checkpoint cache. `cargo run --example quickstart`.

#[cfg(not(target_arch = "wasm32"))]
fn main() -> webmamba::Result<()> {
    use webmamba::session::{Generation, Pace};
    use webmamba::{CacheConfig, Checkpoint, Engine, GenerateOptions, Runtime, Tokenizer, sampling::Sampler};

    let checkpoint = Checkpoint::from_dir("www/models/shakespeare-mamba-3m")?;
    let tokenizer = Tokenizer::from_bytes(checkpoint.tokenizer_json.as_deref().unwrap_or_default())?;
    let engine = Engine::cpu(checkpoint.weights()?);
    let mut rt = Runtime::new(engine, CacheConfig::for_model(&checkpoint.config))?;
    let session = rt.new_session()?;
    pollster::block_on(rt.append(session, &tokenizer.encode("ROMEO:", true)?))?;
    let options = GenerateOptions { max_tokens: 40, stop_at_eos: true };
    let mut generation = Generation::new(&tokenizer, Sampler::greedy(), options, Vec::new(), Pace::ToEnd)?;
    let tail = pollster::block_on(generation.run(&mut rt, session, &tokenizer, |piece| {
        print!("{}", piece.text);
        true
    }))?;
    println!("{tail}");
    Ok(())
}

/// In the browser, the JavaScript API (README, docs/API.md).
#[cfg(target_arch = "wasm32")]
fn main() {}
