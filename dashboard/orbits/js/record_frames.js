// For tests and benchmarks (page.evaluate): log [frame, performance.now()] of every frame shown in
// window.__orbitsFrames.
() => {
  const s = Bokeh.documents[0].get_model_by_name('orbits_frame');
  window.__orbitsFrames = [];
  if (!window.__orbitsRecording) {
    window.__orbitsRecording = true;
    s.property('value').change.connect(() => window.__orbitsFrames.push([s.value, performance.now()]));
  }
}
