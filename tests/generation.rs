//! Text generation ([`Generation`]), on the CPU reference and on the GPU: run to the end (what
//! `Session.generate` and the CLI do; on the GPU the device's greedy batches and top-k) and one
//! token per call (a stream's pulls) give the same pieces, text, logits and state; a detokenizer
//! error ends the generation with its typed error, the tokens generated staying in the history,
//! whichever way it runs, free or constrained (issue 55: one loop, one error policy).

mod common;

use common::fixtures::{self, Fixture};
use common::log;
use webmamba::chat::constraint::{Constraint, Format, Grammars};
use webmamba::sampling::{Sampler, SamplingOptions};
use webmamba::session::{Generation, Pace, Piece};
use webmamba::{
    CacheConfig, Engine, Error, GenerateOptions, GpuContext, GpuModelOptions, Runtime, SessionId, Tokenizer,
};

const PROMPT: [u32; 11] = [5, 17, 3, 99, 42, 7, 7, 64, 1, 250, 12];
const GEN: usize = 24;
/// A stop string greedy decoding reaches after `PROMPT` (at "asFf�(�wic\\�Gv���Ff/").
const STOP: &str = "Ff/";

/// A fixture whose generations after `PROMPT` are text (`tiny-f32`'s greedy one is a lone
/// continuation byte, over and over).
fn fixture() -> Fixture {
    fixtures::all().into_iter().find(|f| f.name == "bias-untied-bf16").unwrap()
}

async fn runtime(f: &Fixture, ctx: Option<&GpuContext>) -> Runtime {
    let c = f.checkpoint();
    let engine = match ctx {
        Some(ctx) => {
            Engine::gpu(ctx, &c, GpuModelOptions { max_tokens: 64, ..Default::default() }).await.unwrap()
        }
        None => Engine::cpu(c.weights().unwrap()),
    };
    Runtime::new(engine, CacheConfig { block_size: 16, ..Default::default() }).unwrap()
}

async fn session(rt: &mut Runtime) -> SessionId {
    let s = rt.new_session().unwrap();
    rt.append(s, &PROMPT).await.unwrap();
    s
}

fn options() -> GenerateOptions {
    GenerateOptions { max_tokens: GEN, stop_at_eos: false }
}

/// `f`'s tokenizer with a decoder whose text is no prefix of its text one token later (every
/// character but the last becomes `§`), so streaming it fails (`InvalidPrefix`) once a second
/// token adds text.
fn unstreamable(f: &Fixture) -> Tokenizer {
    let mut json: serde_json::Value = serde_json::from_slice(f.tokenizer).unwrap();
    let replace = serde_json::json!({ "type": "Replace", "pattern": { "Regex": "[\\s\\S](?=[\\s\\S])" }, "content": "§" });
    let decoders = serde_json::json!([json["decoder"].clone(), { "type": "Fuse" }, replace]);
    json["decoder"] = serde_json::json!({ "type": "Sequence", "decoders": decoders });
    Tokenizer::from_bytes(&serde_json::to_vec(&json).unwrap()).unwrap()
}

/// Runs `g` on session `id` one way or the other; returns its pieces, then the text held back
/// to the end or the error that ended it.
async fn drive(
    g: &mut Generation,
    rt: &mut Runtime,
    id: SessionId,
    tok: &Tokenizer,
    pace: Pace,
) -> (Vec<Piece>, webmamba::Result<String>) {
    let mut pieces = Vec::new();
    let ended = match pace {
        Pace::ToEnd => {
            g.run(rt, id, tok, |p| {
                pieces.push(p.clone());
                true
            })
            .await
        }
        Pace::Stepwise => loop {
            match g.next(rt, id, tok).await {
                Ok(Some(p)) => pieces.push(p),
                Ok(None) => break g.end(rt, id, tok).await,
                Err(e) => break Err(e),
            }
        },
    };
    (pieces, ended)
}

async fn paces_agree(ctx: Option<&GpuContext>) {
    let f = &fixture();
    let tok = Tokenizer::from_bytes(f.tokenizer).unwrap();
    let greedy = SamplingOptions::default();
    let top_k = SamplingOptions { temperature: 0.8, top_k: 20, ..greedy };
    let top_p = SamplingOptions { temperature: 1.0, top_p: 0.9, ..greedy };
    for (o, stops) in [(greedy, vec![STOP.to_string()]), (greedy, vec![]), (top_k, vec![]), (top_p, vec![])] {
        let what = format!("{o:?} stop at {stops:?}");
        let mut rt = runtime(f, ctx).await;
        let (a, b) = (session(&mut rt).await, session(&mut rt).await);
        let mut ran = Vec::new();
        for (id, pace) in [(a, Pace::ToEnd), (b, Pace::Stepwise)] {
            let mut g =
                Generation::new(&tok, Sampler::new(o, 7).unwrap(), options(), stops.clone(), pace).unwrap();
            let (pieces, tail) = drive(&mut g, &mut rt, id, &tok, pace).await;
            let tokens: Vec<u32> = pieces.iter().map(|p| p.token).collect();
            let text = pieces.iter().map(|p| p.text.as_str()).collect::<String>() + &tail.unwrap();
            let all = tok.decode(&tokens, true).unwrap();
            let before_stop =
                stops.first().and_then(|s| all.find(s.as_str())).map_or(&all[..], |at| &all[..at]);
            assert_eq!(text, before_stop, "{what} {pace:?}: the text is the tokens', up to a stop string");
            assert_eq!(rt.history(id).unwrap()[PROMPT.len()..], tokens, "{what} {pace:?}: history");
            ran.push((pieces, text));
        }
        assert_eq!(ran[0], ran[1], "{what}: run to the end = one token per call");
        assert!(stops.is_empty() || ran[0].0.len() < GEN, "{what}: the stop string ends it");
        // History, logits and state, bit for bit.
        assert!(rt.export_state(a).await.unwrap() == rt.export_state(b).await.unwrap(), "{what}: state");
    }
}

/// What a constrained generation in the detokenizer test must match: letters and spaces, more
/// than `GEN` tokens can write, so no end token may come.
const LETTERS: &str = "[a-zA-Z ]{400}";

async fn a_detokenizer_error_ends_the_generation(ctx: Option<&GpuContext>) {
    let f = &fixture();
    let (good, bad) = (Tokenizer::from_bytes(f.tokenizer).unwrap(), unstreamable(f));
    let grammars = Grammars::new(f.tokenizer, f.checkpoint().config.vocab_size, 0).unwrap();
    // A fresh constraint holding `since`, when constrained.
    let guide = |constrained: bool, since: &[u32]| {
        constrained.then(|| {
            let mut k = grammars.constraint(&Format::Regex(LETTERS.into())).unwrap();
            k.replay(since).unwrap();
            k
        })
    };
    let generation = |tok: &Tokenizer, o: GenerateOptions, pace: Pace, k: Option<Constraint>| {
        let g = Generation::new(tok, Sampler::greedy(), o, Vec::new(), pace).unwrap();
        match k {
            Some(k) => g.with_constraint(k),
            None => g,
        }
    };
    let mut rt = runtime(f, ctx).await;
    // Free text, and text held to a grammar (the same loop, every pick masked), fail alike.
    for constrained in [false, true] {
        let r = session(&mut rt).await;
        // The tokens a good detokenizer lets through: the decode loop's own for free text; for
        // constrained text (no other loop makes it) the same generation with the good one.
        let want = match guide(constrained, &[]) {
            None => rt.generate(r, &mut Sampler::greedy(), options(), |_| true).await.unwrap(),
            Some(k) => {
                let mut g = generation(&good, options(), Pace::ToEnd, Some(k));
                let (pieces, ended) = drive(&mut g, &mut rt, r, &good, Pace::ToEnd).await;
                ended.unwrap();
                pieces.iter().map(|p| p.token).collect()
            }
        };
        assert_eq!(want.len(), GEN, "constrained {constrained}: {want:?}");
        let mut decoder = bad.stream(true);
        let fails =
            want.iter().position(|&t| decoder.step(&bad, t).is_err()).expect("a token the decoder fails on");
        log(&format!("constrained {constrained}: the unstreamable decoder fails on generated token {fails}"));
        for pace in [Pace::ToEnd, Pace::Stepwise] {
            let s = session(&mut rt).await;
            let mut g = generation(&bad, options(), pace, guide(constrained, &[]));
            let (pieces, ended) = drive(&mut g, &mut rt, s, &bad, pace).await;
            let what = format!("constrained {constrained}, {pace:?}");
            assert!(matches!(ended, Err(Error::Tokenizer(_))), "{what}: {ended:?}");
            assert_eq!(
                pieces.iter().map(|p| p.token).collect::<Vec<_>>(),
                want[..fails],
                "{what}: pieces before it"
            );
            let history = rt.history(s).unwrap().to_vec();
            assert_eq!(history[PROMPT.len()..], want[..=fails], "{what}: the token whose text failed stays");
            assert!(g.is_done() && g.next(&mut rt, s, &bad).await.unwrap().is_none(), "{what}: it ended");
            let checkpoints = rt.stats(s).unwrap().checkpoints;
            assert!(checkpoints.contains(&history.len()), "{what}: its end was kept: {checkpoints:?}");
            let o = GenerateOptions { max_tokens: GEN - fails - 1, stop_at_eos: false };
            let more = match guide(constrained, &want[..=fails]) {
                None => rt.generate(s, &mut Sampler::greedy(), o, |_| true).await.unwrap(),
                Some(k) => {
                    let mut g = generation(&good, o, Pace::ToEnd, Some(k));
                    let (pieces, ended) = drive(&mut g, &mut rt, s, &good, Pace::ToEnd).await;
                    ended.unwrap();
                    pieces.iter().map(|p| p.token).collect()
                }
            };
            assert_eq!(more, want[fails + 1..], "{what}: the session goes on exactly");
        }
    }
}

dual_backend_test!(paces_agree, a_detokenizer_error_ends_the_generation);
