// Sizes as the page writes them (model table, progress text, timeline, cache line).

/** Bytes as MiB: two decimals under 1 MiB, one above. */
export const mib = (bytes) => `${(bytes / 2 ** 20).toFixed(bytes < 2 ** 20 ? 2 : 1)} MiB`;

/** A download's size as people read it: B, KiB, MiB or GiB. */
export const size = (bytes) => (bytes < 1024 ? `${bytes} B` : bytes < 2 ** 20 ? `${Math.round(bytes / 1024)} KiB`
  : bytes < 2 ** 30 ? mib(bytes) : `${(bytes / 2 ** 30).toFixed(2)} GiB`);
