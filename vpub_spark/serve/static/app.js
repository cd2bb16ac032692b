// vpub serve's page: plain JavaScript, no build step, no CDN. It reads the schema,
// builds the form, asks every method for the same query and draws the intervals.
// Queries go as JSON ranges/sensitive in the schema's own labels (no condition text
// is built here), so any label works, parentheses and quotes included.
"use strict";

const METHODS = ["dyn-ana", "dyn-gen", "sta-ana", "sta-gen"];
let schema = null;

function el(tag, attrs = {}, text = "") {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text) node.textContent = text;
  return node;
}

function showError(message) {
  const box = document.getElementById("error");
  box.textContent = message;
  box.hidden = !message;
}

async function api(path, body) {
  const headers = { "Content-Type": "application/json" };
  const token = sessionStorage.getItem("vpub-token");
  if (token) headers.Authorization = "Bearer " + token;
  const init = body === undefined ? { headers } : { method: "POST", headers, body: JSON.stringify(body) };
  const response = await fetch(path, init);
  const answer = await response.json().catch(() => ({ error: response.statusText }));
  if (response.status === 401) document.getElementById("token-box").hidden = false;
  if (!response.ok) {
    const where = answer.field ? " (" + answer.field + ")" : "";
    throw new Error(answer.error + where);
  }
  return answer;
}

function select(id, labels, chosen) {
  const s = el("select", { id });
  labels.forEach((label, i) => {
    const o = el("option", { value: String(i) }, label);  // the label's index in the schema
    if (i === chosen) o.selected = true;
    s.appendChild(o);
  });
  return s;
}

function buildForm() {
  const fields = document.getElementById("qi-fields");
  fields.replaceChildren();
  for (const [name, labels] of Object.entries(schema.qi)) {
    const row = el("div", { class: "qi-row" });
    const use = el("input", { type: "checkbox", id: "qi-" + name + "-use" });
    const label = el("label", { for: use.id });
    label.append(use, " " + name);
    const low = select("qi-" + name + "-low", labels, 0);
    const high = select("qi-" + name + "-high", labels, labels.length - 1);
    low.setAttribute("aria-label", name + " from");
    high.setAttribute("aria-label", name + " to");
    for (const s of [low, high]) s.addEventListener("change", () => { use.checked = true; });
    row.append(label, low, high);
    fields.appendChild(row);
  }
  const [sname, slabels] = Object.entries(schema.sensitive)[0];
  document.getElementById("sensitive-name").textContent = sname;
  const choices = document.getElementById("sensitive-fields");
  choices.replaceChildren();
  slabels.forEach((value, i) => {
    const box = el("input", { type: "checkbox", id: "sens-" + i, value: String(i) });
    box.checked = true;
    const label = el("label", { for: box.id });
    label.append(box, " " + value);
    choices.appendChild(label);
  });
}

function sensitiveBoxes() {
  return Array.from(document.querySelectorAll("#sensitive-fields input"));
}

function query() {
  const ranges = {};
  for (const [name, labels] of Object.entries(schema.qi)) {
    if (!document.getElementById("qi-" + name + "-use").checked) continue;
    ranges[name] = ["low", "high"].map((end) =>
      labels[Number(document.getElementById("qi-" + name + "-" + end).value)]);
  }
  const [sname, slabels] = Object.entries(schema.sensitive)[0];
  const sensitive = sensitiveBoxes().filter((b) => b.checked).map((b) => slabels[Number(b.value)]);
  if (!sensitive.length) throw new Error("tick at least one " + sname);
  return { ranges, sensitive };
}

function drawBars(answers) {
  const bars = document.getElementById("bars");
  bars.replaceChildren();
  const top = Math.max(1, ...answers.map((a) => a.upper));
  for (const a of answers) {
    const row = el("div", { class: "bar-row", id: "result-" + a.method });
    row.dataset.lower = a.lower;
    row.dataset.upper = a.upper;
    const track = el("div", { class: "track", title: a.method });
    const bar = el("div", { class: "bar" + (a.method.startsWith("sta") ? " static" : "") });
    bar.style.left = (100 * a.lower / top) + "%";
    bar.style.width = (100 * (a.upper - a.lower) / top) + "%";
    track.appendChild(bar);
    const text = a.lower.toLocaleString() + " – " + a.upper.toLocaleString();
    row.append(el("span", {}, a.method), track, el("span", { class: "range" }, text));
    bars.appendChild(row);
  }
}

async function count(event) {
  event.preventDefault();
  showError("");
  try {
    const q = query();
    const answers = await Promise.all(METHODS.map((method) => api("/statdb/count", { ...q, method })));
    const best = answers[0];
    document.getElementById("answer-text").textContent =
      "Between " + best.lower.toLocaleString() + " and " + best.upper.toLocaleString() +
      " of " + schema.rows.toLocaleString() + " people (answered in " + best.elapsed_ms.toFixed(1) + " ms).";
    drawBars(answers);
    document.getElementById("answer").hidden = false;
  } catch (e) {
    showError(e.message);
  }
}

function listItems(id, items) {
  // a list and its heading (the list's parent box) are shown only when there is something to list
  const list = document.getElementById(id);
  list.replaceChildren(...items.map((t) => el("li", {}, t)));
  document.getElementById(id + "-box").hidden = !items.length;
}

async function openRelease(id) {
  showError("");
  try {
    const r = await api("/releases/" + encodeURIComponent(id));
    document.getElementById("release-detail").hidden = false;
    document.getElementById("release-detail").dataset.id = id;
    document.getElementById("release-title").textContent = id + " (" + r.method + ")";
    document.getElementById("release-guarantee").textContent = "Guarantee: " + r.guarantee;
    const audit = document.getElementById("release-audit");
    audit.textContent = r.audit.passed
      ? "Audit passed: " + r.audit.checks + " checks on the published files."
      : "Audit FAILED: " + r.audit.failures.join("; ");
    audit.className = r.audit.passed ? "ok" : "bad";
    document.getElementById("release-report").href = "/releases/" + encodeURIComponent(id) + "/report";
    listItems("release-tables", r.tables.map((t) =>
      t.name + " (" + t.kind + "): " + t.attributes.join(", ") + (t.rows ? ", " + t.rows.toLocaleString() + " rows" : "")));
    listItems("release-gnf", (r.gnf ? r.gnf.verdicts : []).map((v) => {
      const rule = r.rules[v.rule];
      const text = rule ? rule.lhs.join(", ") + " → " + rule.rhs : "rule " + v.rule;
      return text + ": " + v.status + " (" + v.reason + ")";
    }));
    const result = document.getElementById("estimate-result");
    result.textContent = "";
    delete result.dataset.estimate;
    const input = document.getElementById("estimate-where");
    input.value = "";
    input.placeholder = r.example || "";
    document.getElementById("estimate-example").textContent = (r.example ? "For example: " + r.example + ". " : "") +
      "Quote a label holding spaces, commas, parentheses or quotes ('Mexican (Mexicano)'), a quote inside doubled ('it''s').";
  } catch (e) {
    showError(e.message);
  }
}

async function openReport(event) {
  // with a token, the report is fetched with it and shown from memory (a link cannot
  // send the Authorization header); without one, the link is followed as it is
  const token = sessionStorage.getItem("vpub-token");
  if (!token) return;
  event.preventDefault();
  showError("");
  const href = event.currentTarget.href;
  const tab = window.open("", "_blank");
  if (!tab) {
    showError("The browser blocked the report's tab: allow pop-ups for this page.");
    return;
  }
  try {
    const response = await fetch(href, { headers: { Authorization: "Bearer " + token } });
    if (!response.ok) throw new Error((await response.json().catch(() => ({}))).error || response.statusText);
    const page = await response.text();  // it carries its own policy: it loads nothing
    const url = URL.createObjectURL(new Blob([page], { type: "text/html" }));
    tab.location.href = url;
    setTimeout(() => URL.revokeObjectURL(url), 60000);
  } catch (e) {
    tab.close();
    showError(e.message);
  }
}

async function estimate(event) {
  event.preventDefault();
  showError("");
  const id = document.getElementById("release-detail").dataset.id;
  const out = document.getElementById("estimate-result");
  out.textContent = "";  // no stale answer beside a new question
  delete out.dataset.estimate;
  try {
    const input = document.getElementById("estimate-where");
    if (!input.value.trim() && input.placeholder) input.value = input.placeholder;  // the example
    const where = input.value;
    const r = await api("/releases/" + encodeURIComponent(id) + "/estimate", { where });
    out.dataset.estimate = r.estimate;
    out.textContent = "About " + r.estimate.toLocaleString(undefined, { maximumFractionDigits: 1 }) +
      " of " + r.rows.toLocaleString() + " rows.";
  } catch (e) {
    showError(e.message);
  }
}

async function loadReleases() {
  let listing;
  try {
    listing = await api("/releases");
  } catch (e) {
    return; // no catalog on this server
  }
  const body = document.querySelector("#releases tbody");
  body.replaceChildren();
  for (const r of listing.releases) {
    const row = el("tr", { class: "release", id: "release-" + r.id });
    const cells = r.error ? [r.id, "", "", r.error, ""]
      : [r.id, (r.created_at || "").replace("T", " ").slice(0, 16), r.method, r.guarantee, (r.rows || 0).toLocaleString()];
    for (const c of cells) row.appendChild(el("td", {}, String(c)));
    if (!r.error) row.addEventListener("click", () => openRelease(r.id));
    body.appendChild(row);
  }
  document.getElementById("release-section").hidden = false;
}

async function start() {
  showError("");
  try {
    schema = await api("/statdb/schema");
  } catch (e) {
    document.getElementById("store-info").textContent = "Not connected.";
    showError(e.message);
    return;
  }
  const sname = Object.keys(schema.sensitive)[0];
  const promise = schema.m && schema.posterior
    ? " Even knowing how it was made, no one can learn a person's " + sname + " beyond 1 in " +
      schema.m + "."
    : schema.m
      ? " Built with the QI-local dealing (local-unsafe): someone who knows how it was " +
        "made may learn a person's " + sname + " beyond 1 in " + schema.m + "."
      : "";
  document.getElementById("store-info").textContent = schema.rows.toLocaleString() +
    " people. Answers are ranges that always hold the true count." + promise;
  buildForm();
  await loadReleases();
  document.body.dataset.ready = "yes";
}

document.getElementById("count-form").addEventListener("submit", count);
document.getElementById("estimate-form").addEventListener("submit", estimate);
document.getElementById("release-report").addEventListener("click", openReport);
document.getElementById("sens-all").addEventListener("click", () => sensitiveBoxes().forEach((b) => { b.checked = true; }));
document.getElementById("sens-none").addEventListener("click", () => sensitiveBoxes().forEach((b) => { b.checked = false; }));
document.getElementById("token-save").addEventListener("click", () => {
  sessionStorage.setItem("vpub-token", document.getElementById("token").value);
  document.getElementById("token-box").hidden = true;
  start();
});
start();
