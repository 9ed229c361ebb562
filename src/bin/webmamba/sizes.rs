//! `webmamba sizes`: a model's weights and the GPU memory they take in each weight format,
//! from config.json alone (a published shape, or a model folder's config) — what a user needs
//! to know before downloading gigabytes. The bytes are those `model.info.weightBytes` /
//! `GpuMemory::weights` report once loaded: matrices in the format (or its fallback for
//! their width, [`WeightFormat::for_shape`]), small tensors in f32.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::ValueEnum;
use serde_json::json;
use webmamba::model::tensor_sizes;
use webmamba::{Config, WeightFormat};

use crate::shapes::Shape;

#[derive(clap::Args)]
pub struct SizesArgs {
    /// Published shapes (repeatable). Default, with no --model either: every shape.
    #[arg(long, value_enum)]
    shape: Vec<Shape>,
    /// Model folders (their config.json; repeatable).
    #[arg(long)]
    model: Vec<PathBuf>,
    /// One JSON object per model on stdout instead of the table.
    #[arg(long)]
    json: bool,
}

/// A model's size: its weights as a checkpoint stores them (2 bytes each in bf16), then the GPU
/// bytes of each format.
struct Sizes {
    name: String,
    weights: u64,
    gpu: Vec<(WeightFormat, u64)>,
}

fn sizes(name: String, config: &Config) -> Result<Sizes> {
    let weights = tensor_sizes(config)?.into_iter().map(|(_, r, c)| (r * c) as u64).sum();
    let gpu = WeightFormat::ALL
        .iter()
        .map(|&f| Ok((f, f.model_bytes(config)?)))
        .collect::<webmamba::Result<_>>()?;
    Ok(Sizes { name, weights, gpu })
}

pub fn run(a: SizesArgs) -> Result<()> {
    let mut models = Vec::new();
    let shapes =
        if a.shape.is_empty() && a.model.is_empty() { Shape::value_variants().to_vec() } else { a.shape };
    for shape in shapes {
        let name =
            shape.to_possible_value().map_or_else(|| format!("{shape:?}"), |v| v.get_name().to_string());
        models.push(sizes(name, &Config::from_json(shape.config_json().as_bytes())?)?);
    }
    for dir in a.model {
        let path = dir.join("config.json");
        let text = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        models.push(sizes(dir.display().to_string(), &Config::from_json(&text)?)?);
    }
    let gb = |b: u64| b as f64 / 1e9;
    if a.json {
        for m in &models {
            let gpu: serde_json::Map<_, _> =
                m.gpu.iter().map(|(f, b)| (f.name().to_string(), json!(b))).collect();
            println!(
                "{}",
                json!({ "model": m.name, "weights": m.weights, "bf16_bytes": 2 * m.weights, "gpu_bytes": gpu })
            );
        }
        return Ok(());
    }
    println!("| model | weights | checkpoint (bf16) | GPU f32 | GPU f16 | GPU int8 | GPU q4 |");
    println!("|---|---|---|---|---|---|---|");
    for m in &models {
        let gpu: Vec<String> = m.gpu.iter().map(|(_, b)| format!("{:.2} GB", gb(*b))).collect();
        println!(
            "| {} | {:.2} B | {:.2} GB | {} |",
            m.name,
            gb(m.weights),
            gb(2 * m.weights),
            gpu.join(" | ")
        );
    }
    Ok(())
}
