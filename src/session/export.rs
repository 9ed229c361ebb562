//! Exporting a session's state as bytes (to keep across a reload, or move between tabs) and
//! importing it back.
//!
//! Format, little-endian:
//! ```text
//! magic  "WMSTATE\0"                    8 bytes
//! version u32 = 3
//! architecture: n u32, n UTF-8 bytes   (Config::arch's name: "mamba", "falcon_mamba"; not in v1)
//! layer pattern: n u32, n UTF-8 bytes  (the block kinds, comma-separated: "mamba2,attention,…";
//!                                       since v3)
//! model fingerprint                     32 bytes  (ModelWeights::fingerprint)
//! token prefix hash                     32 bytes  (blake3 of the tokens)
//! n_tokens u64, tokens u32 × n_tokens
//! n_logits u64, logits f32 × n_logits  (the logits after the last token; 0 or V of them)
//! n_state u64,  state f32 × n_state    (State::to_flat: the fixed regions, then a hybrid's
//!                                       key/value caches — one row per token of the history,
//!                                       so the export grows with the context)
//! checksum                              32 bytes  (blake3 of everything before it)
//! ```
//! Versions 1 (no architecture field: Mamba-1) and 2 (no layer pattern) still import.

use crate::error::{Error, Result};
use crate::model::Arch;
use crate::model::State;
use crate::session::{Done, Runtime, SessionId, finite};

const MAGIC: &[u8; 8] = b"WMSTATE\0";
const VERSION: u32 = 3;

/// A model's layer pattern as exports name it: its block kinds, comma-separated.
fn pattern(c: &crate::model::Config) -> String {
    c.blocks.iter().map(|b| b.kind.name()).collect::<Vec<_>>().join(",")
}

fn tokens_hash(tokens: &[u32]) -> [u8; 32] {
    let mut h = blake3::Hasher::new();
    h.update(b"webmamba/tokens/v1");
    for t in tokens {
        h.update(&t.to_le_bytes());
    }
    *h.finalize().as_bytes()
}

/// A cursor over exported bytes that fails with [`Error::CorruptState`] when they run out.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.0.len() < n {
            return Err(Error::CorruptState("the data ends early".into()));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        self.take(N)?.try_into().map_err(|_| Error::CorruptState("a field has the wrong length".into()))
    }
    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    fn words(&mut self) -> Result<&'a [u8]> {
        let n = self.u64()?;
        let bytes = n.checked_mul(4).filter(|&b| b <= self.0.len() as u64);
        self.take(bytes.ok_or_else(|| Error::CorruptState("a length field is too large".into()))? as usize)
    }
}

impl Runtime {
    /// The session's history, logits and live state as bytes (see the module documentation);
    /// [`Error::NonFiniteOutput`] after non-finite logits (nothing usable to keep).
    pub async fn export_state(&mut self, id: SessionId) -> Result<Vec<u8>> {
        self.check_logits(id)?;
        let s = self.session(id)?;
        if !s.live_valid {
            let history = s.history.tokens().to_vec();
            self.ensure(id, &history).await?;
        }
        self.activate(id)?;
        let state = self.engine.read_state().await?;
        let s = self.session(id)?;
        let logits = s.logits.as_deref().unwrap_or(&[]);
        let flat = state.to_flat();
        let mut out = Vec::with_capacity(128 + 4 * (s.history.len() + logits.len() + flat.len()));
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        let arch = self.engine.config().arch.name().as_bytes();
        out.extend_from_slice(&(arch.len() as u32).to_le_bytes());
        out.extend_from_slice(arch);
        let pattern = pattern(self.engine.config());
        out.extend_from_slice(&(pattern.len() as u32).to_le_bytes());
        out.extend_from_slice(pattern.as_bytes());
        out.extend_from_slice(&self.engine.fingerprint());
        out.extend_from_slice(&tokens_hash(s.history.tokens()));
        out.extend_from_slice(&(s.history.len() as u64).to_le_bytes());
        out.extend_from_slice(bytemuck::cast_slice(s.history.tokens()));
        out.extend_from_slice(&(logits.len() as u64).to_le_bytes());
        out.extend_from_slice(bytemuck::cast_slice(logits));
        out.extend_from_slice(&(flat.len() as u64).to_le_bytes());
        out.extend_from_slice(bytemuck::cast_slice(&flat));
        let checksum = *blake3::hash(&out).as_bytes();
        out.extend_from_slice(&checksum);
        Ok(out)
    }

    /// Replaces the session's history and live state with exported ones. Bytes from another
    /// model or another format version are [`Error::StateMismatch`]; damaged bytes are
    /// [`Error::CorruptState`]; NaN or ±Inf in the logits or the state are
    /// [`Error::NonFiniteOutput`]. The session is unchanged when this fails (its history; its
    /// live state is rebuilt by the next call if the failure came after writing it).
    ///
    /// The imported state stays private to this session: its checkpoints (and those computed
    /// after it) are keyed in a namespace of its own, so another session with the same tokens
    /// computes its own state rather than trusting bytes from outside.
    pub async fn import_state(&mut self, id: SessionId, bytes: &[u8]) -> Result<()> {
        self.session(id)?;
        if bytes.len() < 32 + MAGIC.len() {
            return Err(Error::CorruptState("too short to be an exported state".into()));
        }
        let (body, checksum) = bytes.split_at(bytes.len() - 32);
        if blake3::hash(body).as_bytes() != checksum {
            return Err(Error::CorruptState("checksum mismatch".into()));
        }
        let mut r = Reader(body);
        if r.take(8)? != MAGIC {
            return Err(Error::StateMismatch("not a webmamba state".into()));
        }
        let version = r.u32()?;
        let arch = match version {
            1 => Arch::Mamba.name().as_bytes(),
            2 | VERSION => {
                let n = r.u32()?;
                r.take(n as usize)?
            }
            _ => {
                return Err(Error::StateMismatch(format!(
                    "format version {version}; this build reads 1 to {VERSION}"
                )));
            }
        };
        let ours = self.engine.config().arch.name();
        if arch != ours.as_bytes() {
            return Err(Error::StateMismatch(format!(
                "the state is from a {} model; this one is {ours}",
                String::from_utf8_lossy(arch)
            )));
        }
        if version >= 3 {
            let n = r.u32()?;
            let theirs = r.take(n as usize)?;
            let ours = pattern(self.engine.config());
            if theirs != ours.as_bytes() {
                return Err(Error::StateMismatch(format!(
                    "the state is from a model with layers [{}]; this one has [{ours}]",
                    String::from_utf8_lossy(theirs)
                )));
            }
        }
        if r.take(32)? != self.engine.fingerprint() {
            return Err(Error::StateMismatch("the state was exported from a different model".into()));
        }
        let prefix_hash = r.take(32)?;
        let tokens: Vec<u32> = bytemuck::pod_collect_to_vec(r.words()?);
        let logits: Vec<f32> = bytemuck::pod_collect_to_vec(r.words()?);
        let flat: Vec<f32> = bytemuck::pod_collect_to_vec(r.words()?);
        if !r.0.is_empty() {
            return Err(Error::CorruptState("trailing bytes".into()));
        }
        if tokens_hash(&tokens) != prefix_hash {
            return Err(Error::CorruptState("the token prefix hash does not match the tokens".into()));
        }
        let c = self.engine.config();
        if !(logits.is_empty() || logits.len() == c.vocab_size) || tokens.is_empty() != logits.is_empty() {
            return Err(Error::StateMismatch("the logits do not fit this model".into()));
        }
        self.engine.config().check_ids(&tokens)?;
        let state = State::from_flat(c, &flat)
            .map_err(|_| Error::StateMismatch("the state does not fit this model".into()))?;
        // A hybrid's key/value caches hold one entry per token of the history, no more or less.
        if state.context().is_some_and(|n| n != tokens.len()) {
            return Err(Error::CorruptState("the attention caches do not hold the history's tokens".into()));
        }
        finite::check(&logits, tokens.len())?;
        if !finite::all(&flat) {
            let position = tokens.len().saturating_sub(1) as u64;
            return Err(Error::NonFiniteOutput { position, what: "state".into() });
        }

        // The imported state is nobody's computation here: its checkpoints go to a namespace of
        // the session's own, so no other session resumes from it.
        self.next_salt += 1;
        let mut salt = blake3::Hasher::new();
        salt.update(checksum);
        salt.update(&self.next_salt.to_le_bytes());
        let salt = *salt.finalize().as_bytes();
        let history = self.cache.prefix(tokens, Some(&salt));
        self.activate(id)?;
        // Room for its prompt-end first (CacheBudget fails before anything changed); the slot
        // goes back with the hold if anything after fails.
        let mut hold = self.cache.hold();
        let reserved =
            if history.is_empty() { None } else { hold.reserve(true, history.len(), history.keys())? };
        let written = self.engine.write_state(&state).and_then(|()| match &reserved {
            Some(r) => {
                self.engine.save_pages(&r.fresh_pages()).and_then(|()| self.engine.save_checkpoint(r.slot()))
            }
            None => Ok(()),
        });
        if let Err(e) = written {
            drop(hold);
            if let Some(s) = self.sessions.get_mut(&id.0) {
                s.live_valid = false; // the working state may be half written: rebuild it
            }
            return Err(e);
        }
        let end = reserved.map(|r| hold.insert_end(r, &history, logits.clone()));
        drop(hold);
        let logits = (!logits.is_empty()).then_some(logits);
        self.commit(id, Done { history, logits, end, prefilled: 0, missed: false })?;
        let s = self.session_mut(id)?;
        s.salt = (!s.history.is_empty()).then_some(salt);
        Ok(())
    }
}
