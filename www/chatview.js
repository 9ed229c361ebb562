// The chat view: shown when the loaded model has a chat template (`model.chatTemplate`), with the
// conversation as bubbles. Each message goes through `session.chat`, which renders the whole
// conversation with the template and feeds only what extends the session's history — under
// each reply: how many prompt tokens that turn read and how many came from the state. The view
// has its own session; the text-completion view below keeps the other.

const $ = (id) => document.getElementById(id);

/** The view over `demo` (its model) and the page's `ui` (busy state, errors). */
export function chatView(demo, ui) {
  const view = { session: null, messages: [], model: null };

  function bubble(role, text) {
    const li = document.createElement('li');
    li.className = `bubble ${role}`;
    const body = document.createElement('div');
    body.className = 'text';
    body.textContent = text;
    const meta = document.createElement('div');
    meta.className = 'meta muted';
    li.append(body, meta);
    $('chat-turns').append(li);
    li.scrollIntoView({ block: 'nearest' });
    return li;
  }

  function reset() {
    try { view.session?.close(); } catch { /* a freed model's session */ }
    view.session = view.model ? view.model.newSession() : null;
    view.messages = [];
    const system = $('chat-system').value.trim();
    if (system) view.messages.push({ role: 'system', content: system });
    $('chat-turns').replaceChildren();
  }

  /** A model was loaded: the view shows only for a model with a chat template. */
  view.show = (model) => {
    view.model = model.chatTemplate === undefined ? null : model;
    $('chat-view').hidden = view.model === null;
    document.body.dataset.chat = view.model ? 'yes' : 'no';
    reset();
  };

  view.send = async () => {
    const text = $('chat-input').value.trim();
    if (!text || !view.session || demo.busy) return;
    $('chat-input').value = '';
    view.messages.push({ role: 'user', content: text });
    bubble('user', text);
    const reply = bubble('assistant', '');
    const body = reply.querySelector('.text');
    ui.setBusy(true);
    $('chat-send').disabled = true;
    $('chat-stop').disabled = false;
    ui.setState('generating', 'Replying…');
    try {
      const maxTokens = Math.max(1, Math.floor(Number($('max-tokens').value)) || 80);
      const temperature = Math.max(0, Number($('temperature').value)) || 0;
      const turn = await view.session.chat({ messages: view.messages, maxTokens, temperature,
        onToken: (t) => { body.textContent += t; } });
      body.textContent = turn.text;
      view.messages.push({ role: 'assistant', content: turn.text });
      reply.querySelector('.meta').textContent = `read ${turn.prefilled} of ${turn.promptTokens} prompt tokens `
        + `(${turn.cachedTokens} from the session's state) · ${turn.completionTokens} generated · ${turn.finishReason}`;
      reply.dataset.prefilled = turn.prefilled;
      reply.dataset.promptTokens = turn.promptTokens;
      ui.setState('ready', 'Ready.');
    } catch (e) {
      view.messages.pop();
      reply.remove();
      ui.showError(e, 'Chat: ');
    } finally {
      ui.setBusy(false);
      $('chat-send').disabled = false;
      $('chat-stop').disabled = true;
    }
  };

  $('chat-send').onclick = view.send;
  $('chat-input').onkeydown = (e) => {
    if (e.key === 'Enter' && !e.shiftKey) {
      e.preventDefault();
      view.send();
    }
  };
  $('chat-stop').onclick = () => view.session?.stop();
  $('chat-reset').onclick = reset;
  return view;
}
