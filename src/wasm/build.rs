//! Building a [`Model`] from what a loader read: from bytes in memory (`Model.load`) or from
//! a [`WebSource`] (`fromUrl`, `fromFiles`), on the GPU when it can run the model (the device
//! kept only once the model exists) or else in memory for the CPU backend. A load from a
//! source whose offline-cache copy of a file proved damaged starts again once, that file read
//! from the network.

use crate::engine::Engine;
use crate::error::Result;
use crate::gpu_model::GpuModel;
use crate::load::host::HostSink;
use crate::load::{Phase, Reporter};
use crate::model::{Checkpoint, ModelWeights};
use crate::wasm::backend::{Provisional, fallback, gpu_context, gpu_options};
use crate::wasm::model::{Model, TextFiles};
use crate::wasm::options::LoadConfig;
use crate::wasm::web_source::WebSource;
use crate::wasm::{gguf, gguf_choice, loader};

/// A model built from a source: on a GPU (its device kept only once the model exists), or
/// in memory with the reason it is not on a GPU; and the files it was read from.
struct Built {
    engine: std::result::Result<(GpuModel, Provisional), (ModelWeights, String)>,
    opened: loader::Opened,
}

impl Model {
    /// `Model.load`: `config` is `None` for GGUF `weights` (the file holds its own).
    pub(super) async fn load_bytes(
        config: Option<Vec<u8>>,
        weights: Vec<u8>,
        tokenizer: Option<Vec<u8>>,
        o: LoadConfig,
    ) -> Result<Model> {
        let gguf = gguf::bytes_are_gguf(config.as_deref(), &weights)?;
        let weights_name = if gguf { gguf_choice::BYTES_NAME } else { "model.safetensors" };
        // The caller's digests: the bytes are in memory, so they are checked before anything else.
        let given = config
            .as_ref()
            .map(|_| "config.json")
            .into_iter()
            .chain([weights_name])
            .chain(tokenizer.as_ref().map(|_| "tokenizer.json"));
        o.integrity.check_names(given)?;
        if let Some(config) = &config {
            o.integrity.verify("config.json", config)?;
        }
        o.integrity.verify(weights_name, &weights)?;
        if let Some(t) = &tokenizer {
            o.integrity.verify("tokenizer.json", t)?;
        }
        let checkpoint = match config {
            None => gguf::checkpoint(weights, tokenizer)?,
            Some(config) => {
                Checkpoint::from_bytes(&config, vec![("model.safetensors".into(), weights)], None, tokenizer)?
            }
        };
        let mut reporter = o.reporter();
        let why = match gpu_context(&o.backend).await? {
            Ok(ctx) => {
                let ctx = Provisional::new(ctx);
                match GpuModel::load_reporting(&ctx, &checkpoint, gpu_options(&o), &mut reporter).await {
                    Ok(m) => {
                        let text = (checkpoint.tokenizer_json.as_deref(), &checkpoint.chat);
                        return Self::on_gpu(m, ctx, text, o, reporter.warnings().to_vec());
                    }
                    Err(e) => fallback(&o, e)?,
                }
            }
            Err(why) => why,
        };
        let weights = checkpoint.weights_reporting(&mut reporter)?;
        Self::on_cpu(
            weights,
            why,
            (checkpoint.tokenizer_json.as_deref(), &checkpoint.chat),
            o,
            reporter.warnings(),
        )
    }

    /// Loads from `source`; when a file read from the offline cache proved damaged, its copy
    /// is deleted and the load starts again once, reading that file from the network.
    pub(super) async fn load_source(source: WebSource, o: LoadConfig) -> Result<Model> {
        let mut reporter = o.reporter();
        let built = match Self::build(&source, &o, &mut reporter).await {
            Err(e) => {
                let Some(names) = source.start_again() else { return Err(e) };
                let built = Self::build(&source, &o, &mut reporter).await?;
                for name in names {
                    // Sent with the file's last progress values (all of it, now downloaded).
                    let size = reporter.loaded(Phase::Download, &name);
                    let why = format!(
                        "{name}: the offline cache's copy was damaged ({e}); it was deleted and the file \
                         downloaded again"
                    );
                    reporter.warn(Phase::Download, &name, size, why);
                }
                built
            }
            Ok(built) => built,
        };
        let text = (built.opened.tokenizer_json.as_deref(), &built.opened.chat);
        match built.engine {
            Ok((m, ctx)) => Self::on_gpu(m, ctx, text, o, reporter.warnings().to_vec()),
            Err((weights, why)) => Self::on_cpu(weights, why, text, o, reporter.warnings()),
        }
    }

    /// One try at loading `source`: on a GPU, or else (why not on a GPU) into memory.
    async fn build(source: &WebSource, o: &LoadConfig, reporter: &mut Reporter) -> Result<Built> {
        if let Some((url, w)) = source.digests.fetch_listing().await {
            reporter.warn(Phase::Download, &url, 0, w);
        }
        let opened = match gguf::chosen(source).await? {
            Some(name) => gguf::open(source, &name, reporter).await?,
            None => loader::open(source, reporter).await?,
        };
        let why = match gpu_context(&o.backend).await? {
            // Everything a GPU can refuse is refused here, before any weight byte is read.
            Ok(ctx) => {
                let ctx = Provisional::new(ctx);
                match GpuModel::begin(&ctx, &opened.config, &opened.layout, gpu_options(o)).await {
                    Ok(mut loading) => {
                        let fingerprint =
                            loader::stream(source, &opened, &mut loading.sink, Some(&*ctx), reporter).await?;
                        let m = loading.finish(fingerprint, reporter).await?;
                        return Ok(Built { engine: Ok((m, ctx)), opened });
                    }
                    Err(e) => fallback(o, e)?,
                }
            }
            Err(why) => why,
        };
        let mut sink = HostSink::new(&opened.layout)?;
        let fingerprint = loader::stream(source, &opened, &mut sink, None, reporter).await?;
        let weights = sink.finish(&opened.config, &opened.layout, fingerprint)?;
        Ok(Built { engine: Err((weights, why)), opened })
    }

    /// The model on the CPU (`why`: the reason it is not on a GPU), on the threads it gets,
    /// with a warning where it got fewer than asked for.
    pub(super) fn on_cpu(
        weights: ModelWeights,
        why: String,
        text: TextFiles<'_>,
        o: LoadConfig,
        warnings: &[String],
    ) -> Result<Model> {
        let (threads, warning) = o.cpu_threads();
        let engine = Engine::cpu_with(weights, o.max_context, threads)?;
        let warnings = warnings.iter().cloned().chain(warning).collect();
        Self::assemble(engine, why, text, o, warnings)
    }

    /// The model on the GPU: `ctx`'s device is kept only once the model exists (an error in
    /// between destroys it, as any failed load does).
    pub(super) fn on_gpu(
        m: GpuModel,
        ctx: Provisional,
        text: TextFiles<'_>,
        o: LoadConfig,
        warnings: Vec<String>,
    ) -> Result<Model> {
        let adapter = ctx.summary().to_string();
        let model = Self::assemble(Engine::Gpu(Box::new(m)), adapter, text, o, warnings)?;
        ctx.keep();
        Ok(model)
    }
}
