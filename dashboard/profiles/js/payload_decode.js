// defines: head_codes, head_spectrum
// The profiles page's packed arrays decoded (dashboard/profiles/payload.py, which packs them; its docstring
// gives the layout). Both hold uint16 values as every high byte, then every low byte, each value the
// difference from the one before it along the head's offsets (profiles) or eigenvalues (spectra), mod 2^16.

// The quantised profile of head i of n at every offset: codes[t * 4 + k] (dashboard/common/geometry.py:
// quantise), restored exactly; the fourth from the stored sum of the four less 65534.
function head_codes(q, n, i) {
  const D = n > 0 ? q.length / (8 * n) : 1, half = q.length / 2, codes = new Float64Array(D * 4), run = [0, 0, 0, 0];
  for (let t = 0; t < D; t++) {
    for (let k = 0; k < 4; k++) {
      const j = (k * n + i) * D + t;
      run[k] = (run[k] + q[j] * 256 + q[half + j]) & 65535;
    }
    codes[t * 4] = run[0]; codes[t * 4 + 1] = run[1]; codes[t * 4 + 2] = run[2];
    codes[t * 4 + 3] = (run[3] + 65534 - run[0] - run[1] - run[2]) & 65535;
  }
  return codes;
}

// The S spectrum of head i of n: code * scale[i] / 32767 for each int16 code, NaN for -32768.
function head_spectrum(s, scale, n, i) {
  const E = n > 0 ? s.length / (2 * n) : 0, half = s.length / 2, values = new Float64Array(E);
  let run = 0;
  for (let e = 0; e < E; e++) {
    const j = i * E + e;
    run = (run + s[j] * 256 + s[half + j]) & 65535;
    const code = run >= 32768 ? run - 65536 : run;
    values[e] = code === -32768 ? NaN : code * scale[i] / 32767;
  }
  return values;
}
