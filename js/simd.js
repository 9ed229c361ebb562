// Whether this engine runs WebAssembly relaxed SIMD (Chrome 114, Firefox 146; not Safari): a
// 49-byte module whose one function is `f32x4.relaxed_madd` of three splats, validated, not run.
// index.js and worker.js then start the relaxed build of the wasm module
// (webmamba_relaxed_bg.wasm, scripts/build-relaxed) instead of the plain one (`start`).
const splat = [0x43, 0, 0, 0, 0, 0xfd, 0x13]; // f32.const 0, f32x4.splat
const body = [0, ...splat, ...splat, ...splat, 0xfd, 0x85, 0x02, 0x0b]; // f32x4.relaxed_madd, end
const probe = new Uint8Array([
  0, 0x61, 0x73, 0x6d, 1, 0, 0, 0, // "\0asm", version 1
  1, 5, 1, 0x60, 0, 1, 0x7b, // types: () -> v128
  3, 2, 1, 0, // functions: one of type 0
  10, body.length + 2, 1, body.length, ...body, // code
]);

/** True where the relaxed module can run. */
export const relaxedSimd = (() => {
  try {
    return WebAssembly.validate(probe);
  } catch {
    return false;
  }
})();

/** Starts a build's wasm-bindgen glue (`init`, its default export) on the relaxed-SIMD module
 *  at `relaxedUrl` where the engine has relaxed SIMD and that module can be had, else on the
 *  plain one beside the glue. The caller writes the URL (`new URL('…', import.meta.url)` in its
 *  own file, the pattern bundlers follow). */
export async function start(init, relaxedUrl) {
  if (relaxedSimd) {
    try {
      return await init({ module_or_path: relaxedUrl });
    } catch {
      // the plain module below
    }
  }
  return init();
}
