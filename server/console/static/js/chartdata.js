// The patient chart's data: vital-sign series, laboratory results and the
// timeline, taken from FHIR resources, with every reading left out and
// why. No DOM here; the chart view draws what these functions return.

const LOINC = 'http://loinc.org';

// VITALS are the charts, after the R4 vital signs profiles
// (hl7.org/fhir/R4/observation-vitalsigns.html): each series draws the
// Observations of its LOINC codes; blood pressure reads the systolic and
// diastolic components of its panel, or standalone Observations of those
// codes. unit is the profile's unit, used unless most readings use another.
export const VITALS = [
  {key: 'bp', title: 'Blood pressure', short: 'BP', unit: 'mm[Hg]', panel: '85354-9', series: [
    {key: 'systolic', label: 'Systolic', codes: ['8480-6']},
    {key: 'diastolic', label: 'Diastolic', codes: ['8462-4']}]},
  {key: 'hr', title: 'Heart rate', short: 'Pulse', unit: '/min', series: [{key: 'hr', label: 'Heart rate', codes: ['8867-4']}]},
  {key: 'rr', title: 'Respiratory rate', short: 'Resp.', unit: '/min', series: [{key: 'rr', label: 'Respiratory rate', codes: ['9279-1']}]},
  {key: 'weight', title: 'Body weight', short: 'Weight', unit: 'kg', series: [{key: 'weight', label: 'Body weight', codes: ['29463-7', '3141-9']}]},
  {key: 'bmi', title: 'BMI', short: 'BMI', unit: 'kg/m2', series: [{key: 'bmi', label: 'BMI', codes: ['39156-5']}]},
  {key: 'temp', title: 'Body temperature', short: 'Temp.', unit: 'Cel', series: [{key: 'temp', label: 'Body temperature', codes: ['8310-5', '8331-1']}]},
  {key: 'spo2', title: 'Oxygen saturation', short: 'SpO₂', unit: '%', bounds: [0, 100], series: [{key: 'spo2', label: 'Oxygen saturation', codes: ['2708-6', '59408-5']}]},
];

// UNITS are the units a vital sign may come in: a kind (only units of one
// kind convert into each other), a label to show, and the affine map to
// the kind's base unit (base = value * f + o).
const UNITS = {
  'mm[Hg]': {kind: 'pressure', label: 'mmHg', f: 1, o: 0},
  '/min': {kind: 'rate', label: '/min', f: 1, o: 0},
  'kg': {kind: 'mass', label: 'kg', f: 1, o: 0},
  'g': {kind: 'mass', label: 'g', f: 0.001, o: 0},
  '[lb_av]': {kind: 'mass', label: 'lb', f: 0.45359237, o: 0},
  '[oz_av]': {kind: 'mass', label: 'oz', f: 0.028349523125, o: 0},
  'kg/m2': {kind: 'bmi', label: 'kg/m²', f: 1, o: 0},
  'Cel': {kind: 'temperature', label: '°C', f: 1, o: 0},
  '[degF]': {kind: 'temperature', label: '°F', f: 5 / 9, o: -160 / 9},
  '%': {kind: 'fraction', label: '%', f: 1, o: 0},
};

// UNIT_ALIASES are the spellings seen in the wild for the units above
// (matched case-insensitively, after the UCUM codes themselves).
const UNIT_ALIASES = {
  'mmhg': 'mm[Hg]', 'mm hg': 'mm[Hg]',
  'min-1': '/min', '1/min': '/min', 'beats/min': '/min', '{beats}/min': '/min', 'bpm': '/min', 'breaths/min': '/min', '{breaths}/min': '/min', '/minute': '/min',
  'kilogram': 'kg', 'kilograms': 'kg', 'kgs': 'kg', 'gram': 'g', 'grams': 'g',
  'lb': '[lb_av]', 'lbs': '[lb_av]', 'pound': '[lb_av]', 'pounds': '[lb_av]', '[lb_us]': '[lb_av]', 'oz': '[oz_av]',
  'kg/m^2': 'kg/m2', 'kg/m²': 'kg/m2',
  'c': 'Cel', '°c': 'Cel', 'degc': 'Cel', 'celsius': 'Cel',
  'f': '[degF]', '°f': '[degF]', 'degf': '[degF]', 'fahrenheit': '[degF]',
  'percent': '%', '%{oxygen}': '%',
};

// unitOf names the unit of a Quantity as a key of UNITS, or '' when it is
// unknown; raw is what the Quantity says, for messages.
export function unitOf(q) {
  const raw = String(q.code || q.unit || '').trim();
  for (const cand of [q.code, q.unit]) {
    if (typeof cand !== 'string') continue;
    const s = cand.trim();
    if (UNITS[s]) return {key: s, raw};
    const a = UNIT_ALIASES[s.toLowerCase()];
    if (a) return {key: a, raw};
  }
  return {key: '', raw};
}

// convert turns a value from one unit into another of the same kind.
export function convert(v, from, to) {
  if (from === to) return v;
  const a = UNITS[from], b = UNITS[to];
  return ((v * a.f + a.o) - b.o) / b.f;
}

// unitLabel is how a unit of UNITS reads on screen.
export function unitLabel(key) { return UNITS[key] ? UNITS[key].label : key; }

// parseTime reads a FHIR date or dateTime of any precision as milliseconds
// since the epoch (the start of what it names), NaN when it is not one.
export function parseTime(s) {
  if (typeof s !== 'string') return NaN;
  if (/^\d{4}$/.test(s)) return Date.UTC(Number(s), 0, 1);
  if (/^\d{4}-\d{2}$/.test(s)) return Date.UTC(Number(s.slice(0, 4)), Number(s.slice(5, 7)) - 1, 1);
  return Date.parse(s);
}

// effectiveTime is when an Observation was made: effective[x], else issued.
export function effectiveTime(o) {
  const raw = o.effectiveDateTime || o.effectiveInstant || (o.effectivePeriod && (o.effectivePeriod.start || o.effectivePeriod.end)) || o.issued || '';
  return {raw, t: parseTime(raw)};
}

// codesOf lists the codes of a CodeableConcept, LOINC first.
function codesOf(cc) {
  const out = [];
  for (const c of (cc && cc.coding) || []) {
    if (c && typeof c.code === 'string' && (!c.system || c.system === LOINC)) out.push(c.code);
  }
  return out;
}

// conceptText is a CodeableConcept in words.
export function conceptText(cc) {
  if (!cc) return '';
  if (Array.isArray(cc)) return cc.map(conceptText).filter(Boolean).join(', ');
  if (cc.text) return cc.text;
  const c = (cc.coding || []).find((x) => x && (x.display || x.code));
  return c ? (c.display || c.code) : '';
}

// valueProblem says why an element with value[x] gives no number, or ''
// when its valueQuantity has one.
function valueProblem(x) {
  const q = x.valueQuantity;
  if (q && typeof q.value === 'number' && isFinite(q.value)) return '';
  const absent = x.dataAbsentReason ? ' (' + conceptText(x.dataAbsentReason) + ')' : '';
  if (q) return 'its quantity has no value' + absent;
  if (typeof x.valueString === 'string') return 'its value is text ("' + x.valueString.slice(0, 40) + '"), not a number';
  for (const k of ['valueCodeableConcept', 'valueBoolean', 'valueInteger', 'valueRange', 'valueRatio', 'valueSampledData', 'valueTime', 'valueDateTime', 'valuePeriod']) {
    if (x[k] !== undefined) return 'its value is a ' + k.slice(5) + ', not a quantity';
  }
  return 'it has no value' + absent;
}

// rangeOf reads the first referenceRange's low and high in unit, when they
// are in a unit that converts to it.
function rangeOf(rr, unit) {
  const r = (rr || [])[0];
  if (!r) return null;
  const bound = (q) => {
    if (!q || typeof q.value !== 'number') return undefined;
    const u = unitOf(q).key || unit;
    if (!UNITS[u] || !UNITS[unit] || UNITS[u].kind !== UNITS[unit].kind) return undefined;
    return convert(q.value, u, unit);
  };
  const low = bound(r.low), high = bound(r.high);
  return low === undefined && high === undefined ? null : {low, high};
}

// vitalSigns sorts vital-sign Observations into the charts of VITALS. It
// returns the charts (each series' points in time order, in the chart's
// unit), the readings left out with the reason, and the count of other
// vital signs by name (height, pain score... which have no chart here).
export function vitalSigns(observations) {
  const byCode = new Map();
  for (const c of VITALS) {
    if (c.panel) byCode.set(c.panel, {chart: c, panel: true});
    for (const s of c.series) for (const code of s.codes) byCode.set(code, {chart: c, series: s});
  }
  const raw = new Map(VITALS.map((c) => [c.key, []])); // readings before the unit is chosen
  const leftOut = [];
  const other = new Map();
  for (const o of observations) {
    if (!o || o.resourceType !== 'Observation') continue;
    const ref = 'Observation/' + o.id;
    const hit = codesOf(o.code).map((c) => byCode.get(c)).find(Boolean);
    if (!hit) {
      const name = conceptText(o.code) || 'uncoded';
      other.set(name, (other.get(name) || 0) + 1);
      continue;
    }
    const what = hit.chart.title;
    if (o.status === 'entered-in-error' || o.status === 'cancelled') {
      leftOut.push({ref, what, why: 'its status is ' + o.status});
      continue;
    }
    const when = effectiveTime(o);
    if (isNaN(when.t)) {
      leftOut.push({ref, what, why: 'it has no date'});
      continue;
    }
    // The parts to read: the panel's components, or the Observation itself.
    const parts = [];
    if (hit.panel) {
      for (const s of hit.chart.series) {
        const comp = (o.component || []).find((c) => codesOf(c.code).some((x) => s.codes.includes(x)));
        if (comp) parts.push({series: s, el: comp});
        else leftOut.push({ref, what, why: 'it has no ' + s.label.toLowerCase() + ' component'});
      }
    } else {
      parts.push({series: hit.series, el: o});
    }
    for (const {series, el} of parts) {
      const label = hit.chart.series.length > 1 ? what + ' (' + series.label.toLowerCase() + ')' : what;
      const problem = valueProblem(el);
      if (problem) {
        leftOut.push({ref, what: label, why: problem});
        continue;
      }
      const u = unitOf(el.valueQuantity);
      if (!u.key || UNITS[u.key].kind !== UNITS[hit.chart.unit].kind) {
        leftOut.push({ref, what: label, why: u.raw ? 'its unit "' + u.raw + '" does not convert to ' + unitLabel(hit.chart.unit) : 'its quantity has no unit'});
        continue;
      }
      raw.get(hit.chart.key).push({series: series.key, t: when.t, date: when.raw, id: o.id, value: el.valueQuantity.value,
        unit: u.key, rr: el.referenceRange, from: responseOf(o)});
    }
  }
  const charts = VITALS.map((c) => chartOf(c, raw.get(c.key)));
  return {charts, leftOut, other};
}

// responseOf is the id of the QuestionnaireResponse an Observation was
// extracted from (its derivedFrom), or ''.
function responseOf(o) {
  for (const d of o.derivedFrom || []) {
    const m = /(?:^|\/)QuestionnaireResponse\/([A-Za-z0-9\-.]{1,64})$/.exec((d && d.reference) || '');
    if (m) return m[1];
  }
  return '';
}

// chartOf picks a chart's unit (the one most of its readings use, the
// profile's on a tie) and converts the others to it.
function chartOf(c, readings) {
  const counts = new Map();
  for (const r of readings) counts.set(r.unit, (counts.get(r.unit) || 0) + 1);
  let unit = c.unit;
  for (const [u, n] of counts) if (n > (counts.get(unit) || 0)) unit = u;
  const converted = new Map();
  const series = c.series.map((s) => ({key: s.key, label: s.label, points: []}));
  for (const r of readings) {
    const p = {t: r.t, date: r.date, id: r.id, value: convert(r.value, r.unit, unit)};
    if (r.from) p.from = r.from;
    if (r.unit !== unit) {
      p.recorded = {value: r.value, unit: r.unit};
      converted.set(r.unit, (converted.get(r.unit) || 0) + 1);
    }
    const range = rangeOf(r.rr, unit);
    if (range) { p.low = range.low; p.high = range.high; }
    series.find((s) => s.key === r.series).points.push(p);
  }
  for (const s of series) s.points.sort((a, b) => a.t - b.t || (a.id < b.id ? -1 : 1));
  return {key: c.key, title: c.title, short: c.short, bounds: unit === '%' ? c.bounds : undefined, unit, unitLabel: unitLabel(unit), series,
    converted: [...converted].map(([u, n]) => ({from: unitLabel(u), count: n}))};
}

// INTERPRETATION maps the v3 ObservationInterpretation codes to how the
// chart marks a result.
const INTERPRETATION = {
  H: 'high', HH: 'high', HU: 'high', '>': 'high', HX: 'high',
  L: 'low', LL: 'low', LU: 'low', '<': 'low', LX: 'low',
  A: 'abnormal', AA: 'abnormal', POS: 'abnormal', DET: 'abnormal', R: 'abnormal', W: 'abnormal',
  N: 'normal', NEG: 'normal', ND: 'normal', S: 'normal',
};

// flagOf is an Observation's interpretation: {code, kind, text}, from its
// interpretation or, without one, from its value against its reference
// range (computed: true); null when there is nothing to say.
export function flagOf(o) {
  for (const cc of o.interpretation || []) {
    for (const c of cc.coding || []) {
      if (c && INTERPRETATION[c.code]) return {code: c.code, kind: INTERPRETATION[c.code], text: c.display || conceptText(cc) || c.code};
    }
    if (cc.text) return {code: cc.text, kind: 'abnormal', text: cc.text};
  }
  const q = o.valueQuantity;
  const r = (o.referenceRange || [])[0];
  if (!q || typeof q.value !== 'number' || !r) return null;
  if (r.high && typeof r.high.value === 'number' && q.value > r.high.value) return {code: 'H', kind: 'high', text: 'above the reference range', computed: true};
  if (r.low && typeof r.low.value === 'number' && q.value < r.low.value) return {code: 'L', kind: 'low', text: 'below the reference range', computed: true};
  return null;
}

// valueText is an Observation's value in words.
export function valueText(o) {
  const q = o.valueQuantity;
  if (q && q.value !== undefined) return fmtNumber(q.value) + (q.unit || q.code ? ' ' + (q.unit || q.code) : '');
  if (o.valueCodeableConcept) return conceptText(o.valueCodeableConcept);
  for (const k of ['valueString', 'valueBoolean', 'valueInteger', 'valueDateTime', 'valueTime']) {
    if (o[k] !== undefined) return String(o[k]);
  }
  if (o.valueRange) {
    const {low, high} = o.valueRange;
    return (low ? fmtNumber(low.value) : '') + '–' + (high ? fmtNumber(high.value) : '') + ' ' + ((low || high || {}).unit || '');
  }
  if (o.dataAbsentReason) return '(' + conceptText(o.dataAbsentReason) + ')';
  return '';
}

// fmtNumber shows a measured value with at most four significant figures
// after the point (Synthea's 70.159 mmHg reads as 70.2).
export function fmtNumber(v) {
  if (typeof v !== 'number' || !isFinite(v)) return String(v);
  const a = Math.abs(v);
  const digits = a >= 100 ? 0 : a >= 10 ? 1 : a >= 1 ? 2 : 3;
  return String(Number(v.toFixed(digits)));
}

// labKey groups laboratory results: by LOINC code, else by the first
// coding, else by the text.
function labKey(o) {
  const cs = (o.code && o.code.coding) || [];
  const c = cs.find((x) => x && x.system === LOINC && x.code) || cs.find((x) => x && x.code);
  if (c) return (c.system || '') + '|' + c.code;
  return 'text|' + conceptText(o.code);
}

// labs groups laboratory Observations by code: each group has its latest
// result, its flag, and the numeric results in the latest one's unit in
// time order (the trend). Groups come newest first, then by name.
export function labs(observations) {
  const groups = new Map();
  const leftOut = [];
  for (const o of observations) {
    if (!o || o.resourceType !== 'Observation') continue;
    if (o.status === 'entered-in-error' || o.status === 'cancelled') continue;
    const when = effectiveTime(o);
    if (isNaN(when.t)) {
      leftOut.push({ref: 'Observation/' + o.id, what: conceptText(o.code) || 'a laboratory result', why: 'it has no date'});
      continue;
    }
    const k = labKey(o);
    if (!groups.has(k)) groups.set(k, []);
    groups.get(k).push({o, t: when.t, date: when.raw});
  }
  const out = [];
  for (const [code, items] of groups) {
    items.sort((a, b) => b.t - a.t);
    const latest = items[0];
    const q = latest.o.valueQuantity;
    const unit = q ? (q.code || q.unit || '') : null;
    const trend = unit === null ? [] : items
      .filter((x) => x.o.valueQuantity && typeof x.o.valueQuantity.value === 'number' && (x.o.valueQuantity.code || x.o.valueQuantity.unit || '') === unit)
      .map((x) => ({t: x.t, value: x.o.valueQuantity.value, id: x.o.id, date: x.date}))
      .reverse();
    out.push({code, name: conceptText(latest.o.code) || 'Unnamed result', latest: latest.o, t: latest.t, date: latest.date,
      value: valueText(latest.o), flag: flagOf(latest.o), count: items.length, trend});
  }
  out.sort((a, b) => b.t - a.t || a.name.localeCompare(b.name));
  return {groups: out, leftOut};
}

// periodTimes reads a Period as [start, end] in milliseconds (end NaN when open).
function periodTimes(p) {
  return p ? [parseTime(p.start || p.end), parseTime(p.end)] : [NaN, NaN];
}

// TIMELINE_LANES are the rows of the timeline, with where each type keeps
// its date and how a mark is named.
export const TIMELINE_LANES = [
  {key: 'encounters', type: 'Encounter', title: 'Encounters', shape: 'circle', when: (r) => periodTimes(r.period),
    label: (r) => conceptText(r.type) || (r.class && (r.class.display || r.class.code)) || 'Encounter'},
  {key: 'conditions', type: 'Condition', title: 'Condition onsets', shape: 'diamond',
    when: (r) => r.onsetPeriod ? periodTimes(r.onsetPeriod).slice(0, 1) : [parseTime(r.onsetDateTime || r.recordedDate)],
    label: (r) => conceptText(r.code) || 'Condition'},
  {key: 'procedures', type: 'Procedure', title: 'Procedures', shape: 'square',
    when: (r) => r.performedPeriod ? periodTimes(r.performedPeriod) : [parseTime(r.performedDateTime)],
    label: (r) => conceptText(r.code) || 'Procedure'},
  {key: 'immunizations', type: 'Immunization', title: 'Immunizations', shape: 'triangle', when: (r) => [parseTime(r.occurrenceDateTime)],
    label: (r) => conceptText(r.vaccineCode) || 'Immunization'},
];

// timeline places the resources of each lane on one time axis: marks with
// a start (and an end for periods), a label and the resource's type and
// id; resources without a date are left out.
export function timeline(byLane) {
  const marks = [];
  const leftOut = [];
  for (const lane of TIMELINE_LANES) {
    for (const r of byLane[lane.key] || []) {
      const [t0, t1] = lane.when(r);
      if (isNaN(t0)) {
        leftOut.push({ref: lane.type + '/' + r.id, what: lane.title, why: 'it has no date'});
        continue;
      }
      marks.push({lane: lane.key, type: lane.type, id: r.id, t0, t1: isNaN(t1) || t1 < t0 ? t0 : t1, label: lane.label(r)});
    }
  }
  marks.sort((a, b) => a.t0 - b.t0);
  return {marks, leftOut};
}
