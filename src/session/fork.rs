//! [`Runtime::fork`]: a second session at the same position, for branching chats, best-of-n and
//! tree search. Checkpoints are shared already (equal prefixes have equal keys, and an entry is
//! never changed once made), so a fork copies nothing but, at most, the parent's live state.

use crate::error::Result;
use crate::session::{Runtime, Session, SessionId};

impl Runtime {
    /// A new session with `id`'s history, logits and checkpoint namespace, and its state: as
    /// the parent's pinned prompt-end entry when that is the parent's state (the usual case
    /// after any call: nothing is copied, and for a hybrid every key/value page stays shared),
    /// else copied into the fork's own slot. Both go on independently; the fork's counters
    /// start at zero.
    pub fn fork(&mut self, id: SessionId) -> Result<SessionId> {
        self.session(id)?;
        // The parent's state becomes the working state (parked or live, whichever it is).
        self.activate(id)?;
        let new = self.new_session()?;
        let p = self.session(id)?;
        let end = if p.live_valid { self.end_is_state(p) } else { None };
        let (history, salt, logits, pinned, live_valid) =
            (p.history.clone(), p.salt, p.logits.clone(), p.pinned, p.live_valid);
        let live_slot = self.session(new)?.live_slot;
        if live_valid && end.is_none() {
            // The working state is the parent's: copy it for the fork, or give the new session
            // back.
            if let Err(e) = self.engine.save_state(live_slot) {
                self.close_session(new)?;
                return Err(e);
            }
        }
        // The fork holds the parent's prompt-end as its own latest (one more pin).
        self.cache.repin(None, pinned);
        let f: &mut Session = self.session_mut(new)?;
        f.history = history;
        f.salt = salt;
        f.logits = logits;
        f.pinned = pinned;
        f.live_valid = live_valid;
        f.parked_at = end;
        Ok(new)
    }
}
