// What survives a reload: the session itself (its state, history and logits) is stored by the
// JS API (`session.save(name)`, IndexedDB); this file keeps beside it, in localStorage, what
// only the page knows — which model it was, the prompt as typed, where the prompt ends, the
// generated text and ids, and the last turn (for the timeline and the speed line).

const KEY = 'webmamba-demo';

/** The session's name in the JS API's store: one per model source. */
export const sessionName = (source) => `demo ${source}`;

/** Every model's record: { [source]: { prompt, promptLength, generated, tokens, turn, history } }
 *  (`history`: the session's token ids, restored through the state store when it is on). */
function records() {
  try {
    const r = JSON.parse(localStorage.getItem(KEY) ?? '{}');
    return r && typeof r === 'object' && !Array.isArray(r) ? r : {};
  } catch {
    return {}; // storage off, or not ours: start afresh
  }
}

/** The page's record of the conversation with the model from `source`, or null. */
export function recall(source) {
  const r = records()[source];
  return r && typeof r === 'object' && typeof r.prompt === 'string' ? r : null;
}

/** Saves the session under its model's name and the page's record beside it. Returns '' or
 *  why it could not (a full or disabled storage): the page goes on without it. */
export async function remember(session, source, record) {
  try {
    await session.save(sessionName(source));
    localStorage.setItem(KEY, JSON.stringify({ ...records(), [source]: record }));
    return '';
  } catch (e) {
    return `This conversation could not be saved for a reload (${e?.message ?? e}).`;
  }
}

/** The last model the page loaded from a URL (reloaded on the next visit), or null. */
export function lastModelUrl() {
  try {
    return localStorage.getItem(`${KEY} model`);
  } catch {
    return null;
  }
}

export function setLastModelUrl(url) {
  try {
    if (url) localStorage.setItem(`${KEY} model`, url);
    else localStorage.removeItem(`${KEY} model`);
  } catch {
    // the next visit starts with the embedded model
  }
}
