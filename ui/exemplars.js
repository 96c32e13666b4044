// SPDX-License-Identifier: Apache-2.0
// Exemplars on the timeline: the range API's heaviest stored profiles per step
// (/api/v1/range?exemplars=N). A click on a bar lists that step's profiles (value, span ID where
// they carry one); each opens the flame graph of exactly that profile (profile_id=) or of its
// span (span_id=), so a spike is one click from the flame graph of that moment.
import {fmtValue} from './flame.js';

export const EXEMPLARS_PER_STEP = 3;

// The exemplars of the step that starts at stepMs in the range answer r ([] when none).
export function exemplarsAt(r, stepMs) {
  const e = r && r.exemplars ? r.exemplars.find((x) => x.time_ms === stepMs) : null;
  return e ? e.profiles : [];
}

// Fills el with the step's exemplars: open(kind, id) is called with ('profile', id) or
// ('span', span_id) when one is clicked.
export function renderExemplars(el, r, stepMs, unit, open) {
  el.textContent = '';
  const list = exemplarsAt(r, stepMs);
  el.hidden = false;
  const head = document.createElement('span');
  head.textContent = list.length ? `exemplars at ${new Date(stepMs).toISOString()}:` : 'no exemplars in this step';
  el.append(head);
  for (const x of list) {
    const b = document.createElement('button');
    b.type = 'button';
    b.className = 'exemplar';
    b.dataset.id = x.id;
    b.textContent = `#${x.id} ${fmtValue(x.value, unit)}`;
    b.title = `profile ${x.id} at ${new Date(x.time_ms).toISOString()}: open its flame graph`;
    b.onclick = () => open('profile', String(x.id));
    el.append(b);
    if (x.span_id) {
      const s = document.createElement('a');
      s.href = '#';
      s.className = 'exemplar-span';
      s.textContent = `span ${x.span_id}`;
      s.title = 'open the flame graph of this span (all its profiles in the range)';
      s.onclick = (ev) => { ev.preventDefault(); open('span', x.span_id); };
      el.append(s);
    }
  }
}
