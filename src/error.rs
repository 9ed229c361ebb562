//! The crate's one error type. Every fallible public function returns [`Result`]; the wasm
//! layer turns an [`Error`] into a JavaScript `Error` named `WebMambaError` whose `code` is
//! [`Error::code`], so callers can branch on the kind without parsing messages.

/// Everything that can go wrong in webmamba, with enough structure to say what and where.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No GPU adapter could be found (no WebGPU in this browser, or no native driver).
    #[cfg_attr(target_arch = "wasm32", error("WebGPU is not available in this browser: {reason}"))]
    #[cfg_attr(not(target_arch = "wasm32"), error("no native GPU adapter found: {reason}"))]
    NoAdapter {
        /// Why the request failed, as the platform reported it.
        reason: String,
    },

    /// The adapter exists but refused to open a device with the requested features and limits.
    #[error("could not open a GPU device on adapter '{adapter}': {reason}")]
    DeviceRequest {
        /// Name of the adapter that refused.
        adapter: String,
        /// The platform's reason.
        reason: String,
    },

    /// WebGPU reported a validation, out-of-memory or internal error while doing `context`.
    #[error("GPU error while {context}: {message}")]
    Gpu {
        /// What we were doing (creating a pipeline, uploading a buffer, ...).
        context: String,
        /// The message WebGPU gave.
        message: String,
    },

    /// Mapping a buffer for reading back to the CPU failed.
    #[error("GPU readback failed: {0}")]
    Readback(String),

    /// A tensor or argument did not have the shape an operation needs.
    #[error("shape mismatch for {tensor}: expected {expected:?}, got {got:?}")]
    ShapeMismatch {
        /// Name of the tensor or argument.
        tensor: String,
        /// The shape that was needed.
        expected: Vec<usize>,
        /// The shape that was given.
        got: Vec<usize>,
    },

    /// `config.json` is not valid JSON or lacks a required field.
    #[error("invalid config.json: {0}")]
    Config(String),

    /// The checkpoint is not a model webmamba can run (unknown `model_type`, Mamba-2, ...).
    #[error("unsupported model: {0}")]
    UnsupportedModel(String),

    /// A safetensors file is malformed (truncated, bad header, inconsistent index).
    #[error("{file}: {reason}")]
    Safetensors {
        /// The file's name.
        file: String,
        /// What is wrong with it.
        reason: String,
    },

    /// A GGUF file is malformed (bad magic or version, a size past a limit, tensors that
    /// overlap or run past the end, metadata of the wrong type).
    #[error("{file}: {reason}")]
    Gguf {
        /// The file's name.
        file: String,
        /// What is wrong with it.
        reason: String,
    },

    /// A tensor the model needs is not in the checkpoint.
    #[error("missing tensor {tensor} (looked in {file})")]
    MissingTensor {
        /// Full tensor name.
        tensor: String,
        /// The file(s) searched.
        file: String,
    },

    /// A tensor is stored in a dtype that cannot be a weight (only F32, F16 and BF16 can).
    #[error("tensor {tensor} has dtype {dtype}; weights must be F32, F16 or BF16")]
    UnsupportedDtype {
        /// Full tensor name.
        tensor: String,
        /// The dtype found.
        dtype: String,
    },

    /// A weight is NaN or infinite: the model would compute NaN logits.
    #[error(
        "tensor {tensor} holds a non-finite value (NaN or ±Inf) at element {index}: the checkpoint is damaged"
    )]
    NonFiniteWeight {
        /// Full tensor name.
        tensor: String,
        /// Index of the first such element (row-major).
        index: u64,
    },

    /// The model computed NaN or ±Inf from finite weights: they overflow f32 at run time on this
    /// input. The session keeps the tokens fed (the one at `position` included) and stays
    /// usable: rewind or edit to an earlier position and go on from there. (An imported state
    /// holding NaN or ±Inf is refused with it too, the session unchanged.)
    #[error(
        "the model's output is not finite (NaN or ±Inf) in the {what} after position {position} of \
         the history: its weights overflow at run time on this input; rewind to an earlier \
         position to go on"
    )]
    NonFiniteOutput {
        /// Index in the session's history of the token after which the output is not finite
        /// (the last token of the call that computed it).
        position: u64,
        /// What is not finite: "logits", or "state" (an imported state).
        what: String,
    },

    /// A chat template could not be compiled or rendered (a syntax error, the template's own
    /// `raise_exception`, a value it cannot use); `line` is the template line when known.
    #[error("chat template{}: {message}", line.map(|l| format!(" line {l}")).unwrap_or_default())]
    Template {
        /// The line of the template.
        line: Option<usize>,
        /// What went wrong.
        message: String,
    },

    /// `tokenizer.json` could not be loaded, or encoding/decoding failed.
    #[error("tokenizer: {0}")]
    Tokenizer(String),

    /// Reading a file failed: natively, or in the browser a download (an HTTP status, a stall,
    /// a truncated body, a redirect loop, a CORS block) or a file over its size cap.
    #[error("{path}: {reason}")]
    Io {
        /// The path.
        path: String,
        /// The OS error.
        reason: String,
    },

    /// A downloaded (or cached, or given) file does not hash to the digest published for it —
    /// by the caller's `integrity` option or by its host (the Hub's SHA-256 of an LFS file): the
    /// bytes are damaged, or not the published file. Nothing of it was kept in the offline cache.
    #[error("{file}: integrity check failed: expected {expected}, the bytes read hash to {got}")]
    Integrity {
        /// The file's name.
        file: String,
        /// What was expected and who published it ("sha256-… (the integrity option)").
        expected: String,
        /// What the bytes hash to (SRI form).
        got: String,
    },

    /// The checkpoint cache cannot hold a checkpoint that must be kept.
    #[error("checkpoint cache budget of {budget} bytes cannot fit {needed} more: {reason}")]
    CacheBudget {
        /// Bytes the new checkpoint needs.
        needed: u64,
        /// The budget.
        budget: u64,
        /// Why room could not be made.
        reason: String,
    },

    /// An exported state does not belong here (another model, another format version).
    #[error("state does not match: {0}")]
    StateMismatch(String),

    /// Exported state bytes are damaged (checksum or length wrong).
    #[error("corrupt state: {0}")]
    CorruptState(String),

    /// A broken invariant inside webmamba (a bug): reported as an error, never a panic, so a
    /// page's call rejects instead of the module aborting. The session stays usable where the
    /// failing call allows.
    #[error("internal error (please report): {0}")]
    Internal(String),

    /// A call came in while another call on the same model was still running (JavaScript).
    #[error("busy: {0}")]
    Busy(String),

    /// The caller's `AbortSignal` fired: a generation stopped between tokens (the session
    /// continues from there), or a load stopped (its downloads cancelled, what it had allocated
    /// freed). (In JavaScript the error's `name` is `AbortError`, as `fetch` rejects.)
    #[error("aborted: {0}")]
    Aborted(String),

    /// No session with this id (closed, or never opened).
    #[error("no session {0}")]
    NoSession(u64),

    /// The browser's storage (IndexedDB) refused: a full quota (`QuotaExceededError`), storage
    /// disabled (some private windows), ...
    #[error("{what}: {reason}")]
    Storage {
        /// What was being done.
        what: String,
        /// What the browser said.
        reason: String,
    },

    /// An argument is unusable for a reason other than its shape (empty, out of range, ...).
    #[error("invalid input: {0}")]
    InvalidInput(String),

    /// A structured-output format the grammar engine (llguidance) refused — a JSON schema, a
    /// regex, a tool's parameters — or one that allows no further token in the middle of a
    /// generation. Its code is `InvalidInput`, as every unusable argument's.
    #[error("invalid input: {message}")]
    Grammar {
        /// What was wrong and where, in a sentence for the page's developer.
        message: String,
        /// The engine's own text (its first lines, without its state dump), for a bug report;
        /// not part of the message ([`Error::detail`], `error.detail` in JavaScript).
        detail: String,
    },

    /// A model does not fit in the memory it must go into (wasm32's 4 GiB, the GPU's memory).
    #[error("{what} need {} ({needed} bytes), but {limit}", gb(*needed))]
    OutOfMemory {
        /// What needs the memory ("the weights on the CPU backend", ...).
        what: String,
        /// Bytes needed.
        needed: u64,
        /// What limits it, in words with the numbers.
        limit: String,
    },

    /// The GPU device was lost (driver reset, the tab in the background for long, another page
    /// taking the memory, or [`crate::GpuContext::destroy`]). Nothing on it can be used again:
    /// load the model anew (a new context) and re-import each session's exported state.
    #[error("the GPU device was lost ({reason}): load the model again and re-import saved states")]
    DeviceLost {
        /// Why, as WebGPU says it.
        reason: String,
    },

    /// A call would make the context (the tokens an attention layer's key/value cache holds)
    /// longer than the model's `maxContext`. Nothing ran: the state is as it was. Start a new
    /// session, rewind, or load the model with a larger `maxContext`.
    #[error("the context would hold {needed} tokens but this model's maxContext is {max_context}")]
    ContextFull {
        /// Tokens the context would hold after the call.
        needed: u64,
        /// The most it may hold.
        max_context: u64,
    },

    /// A request exceeds one of the device's limits (binding size, workgroup count, ...).
    #[error("{what} is {requested} but this device allows at most {limit}")]
    LimitExceeded {
        /// Which limit.
        what: &'static str,
        /// What was asked for.
        requested: u64,
        /// What the device allows.
        limit: u64,
    },
}

impl Error {
    /// A stable, machine-readable name for the kind of error (the JS `error.code`).
    pub fn code(&self) -> &'static str {
        match self {
            Error::NoAdapter { .. } => "NoAdapter",
            Error::DeviceRequest { .. } => "DeviceRequest",
            Error::Gpu { .. } => "Gpu",
            Error::Readback(_) => "Readback",
            Error::ShapeMismatch { .. } => "ShapeMismatch",
            Error::Config(_) => "Config",
            Error::UnsupportedModel(_) => "UnsupportedModel",
            Error::Safetensors { .. } => "Safetensors",
            Error::Gguf { .. } => "Gguf",
            Error::MissingTensor { .. } => "MissingTensor",
            Error::UnsupportedDtype { .. } => "UnsupportedDtype",
            Error::NonFiniteWeight { .. } => "NonFiniteWeight",
            Error::NonFiniteOutput { .. } => "NonFiniteOutput",
            Error::Tokenizer(_) => "Tokenizer",
            Error::Template { .. } => "Template",
            Error::Io { .. } => "Io",
            Error::Integrity { .. } => "Integrity",
            Error::CacheBudget { .. } => "CacheBudget",
            Error::StateMismatch(_) => "StateMismatch",
            Error::CorruptState(_) => "CorruptState",
            Error::NoSession(_) => "NoSession",
            Error::Busy(_) => "Busy",
            Error::Internal(_) => "Internal",
            Error::Aborted(_) => "Aborted",
            Error::Storage { .. } => "Storage",
            Error::InvalidInput(_) | Error::Grammar { .. } => "InvalidInput",
            Error::ContextFull { .. } => "ContextFull",
            Error::LimitExceeded { .. } => "LimitExceeded",
            Error::OutOfMemory { .. } => "OutOfMemory",
            Error::DeviceLost { .. } => "DeviceLost",
        }
    }

    /// What the error keeps beyond its message (the grammar engine's own text), when it keeps
    /// anything: JavaScript's `error.detail`.
    pub fn detail(&self) -> Option<&str> {
        match self {
            Error::Grammar { detail, .. } if !detail.is_empty() => Some(detail),
            _ => None,
        }
    }
}

/// `bytes` as gigabytes with two decimals ("1.61 GB").
pub(crate) fn gb(bytes: u64) -> String {
    format!("{:.2} GB", bytes as f64 / 1e9)
}

/// `Result` with the crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
