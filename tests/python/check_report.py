"""Renders the HTML report in headless Chromium (Debian's `chromium`, driven by Playwright),
asserts on its DOM, and writes screenshots.

Usage: check_report.py REPORT.html SCREENSHOT_DIR

For each viewport (1366x768, 1920x1080) and colour scheme (light, dark) it checks:
- the page makes no request besides its own file: every other request is recorded and aborted,
  and the page's Content-Security-Policy refusing one counts as one too;
- the answer comes first: the overall readiness and the first row of summary cards are within
  the first screen, every card before any chart;
- every chart (`figure.chart`) has a title (its `figcaption`, which the chart names with
  aria-labelledby), a legend with at least one entry, and, when it draws axes (an SVG), axis
  titles; every row of bars has exactly one bar and one Wilson whisker;
- once every <details> is opened, no element reaches past the viewport's right edge (a wide
  table may scroll inside its own box) and the page does not scroll sideways; no SVG text falls
  outside its SVG or overlaps another;
- text reads at 100%: no visible text under 12 CSS px (SVG text measured as rendered);
- every HTML text contrasts with the background it sits on (WCAG ratio >= 4.5) in both
  schemes, and the dark scheme is dark.

Screenshots of the first screen (light) go to SCREENSHOT_DIR/report-WIDTHxHEIGHT.png, and of the
dark scheme at 1366x768 to report-1366x768-dark.png. Prints one line per failed check and exits 1
if any failed.
"""

import json
import os
import shutil
import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

VIEWPORTS = [(1366, 768), (1920, 1080)]

CHECKS = r"""
() => {
  const problems = [];
  const W = window.innerWidth, H = window.innerHeight;
  const visible = (el) => {
    const r = el.getBoundingClientRect();
    const s = getComputedStyle(el);
    return r.width > 0 && r.height > 0 && s.visibility !== 'hidden' && s.display !== 'none';
  };
  // The answer first.
  const h1 = document.querySelector('h1 .badge');
  if (!h1) problems.push('no overall readiness badge in the title');
  else if (h1.getBoundingClientRect().bottom > H) problems.push('the overall readiness is below the first screen');
  const cards = [...document.querySelectorAll('#answer .card')];
  if (cards.length === 0) problems.push('no summary card');
  const firstChart = document.querySelector('figure.chart');
  for (const c of cards) {
    if (!c.querySelector('.badge')) problems.push(`card ${c.innerText.split('\n')[0]} has no readiness badge`);
    if (firstChart && (c.compareDocumentPosition(firstChart) & Node.DOCUMENT_POSITION_FOLLOWING) === 0)
      problems.push('a chart comes before the summary cards');
  }
  if (cards.length) {
    const row = cards.filter((c) => Math.abs(c.getBoundingClientRect().top - cards[0].getBoundingClientRect().top) < 1);
    for (const c of row)
      if (c.getBoundingClientRect().bottom > H) problems.push(`the first row of summary cards ends below the first screen (${Math.round(c.getBoundingClientRect().bottom)} px)`);
  }
  // Charts: title, legend, axis titles, whiskers.
  const charts = [...document.querySelectorAll('figure.chart')];
  if (charts.length === 0) problems.push('no chart');
  for (const f of charts) {
    const cap = f.querySelector('figcaption');
    const name = f.id || '(unnamed chart)';
    if (!cap || cap.innerText.trim().length < 10) problems.push(`${name}: no title`);
    const labelled = f.querySelector('[aria-labelledby]');
    if (!labelled || !cap || labelled.getAttribute('aria-labelledby') !== cap.id)
      problems.push(`${name}: the drawing is not labelled by its title`);
    const legend = f.querySelector('.legend');
    if (!legend || legend.querySelectorAll('[role=listitem]').length === 0) problems.push(`${name}: no legend`);
    const svg = f.querySelector('svg');
    if (svg) {
      if (svg.querySelectorAll('.axis-title').length < 2) problems.push(`${name}: fewer than two axis titles`);
      const rows = [...svg.querySelectorAll('g.row')];
      if (rows.length === 0) problems.push(`${name}: no bar`);
      for (const g of rows) {
        const bars = g.querySelectorAll('.bar').length, whiskers = g.querySelectorAll('.whisker').length;
        if (bars !== 1 || whiskers !== 1) problems.push(`${name}: a row with ${bars} bars and ${whiskers} whiskers`);
        for (const el of g.querySelectorAll('.bar, .whisker')) {
          const r = el.getBBox();
          if (![r.x, r.y, r.width, r.height].every(Number.isFinite)) problems.push(`${name}: a bar or whisker without finite coordinates`);
        }
      }
      const box = svg.getBoundingClientRect();
      const texts = [...svg.querySelectorAll('text')].map((t) => [t, t.getBoundingClientRect()]);
      for (const [t, r] of texts) {
        if (r.left < box.left - 1 || r.right > box.right + 1 || r.top < box.top - 1 || r.bottom > box.bottom + 1)
          problems.push(`${name}: text "${t.textContent}" falls outside its chart`);
      }
      for (let i = 0; i < texts.length; i++)
        for (let j = i + 1; j < texts.length; j++) {
          const [a, ra] = texts[i], [b, rb] = texts[j];
          if (a.contains(b) || b.contains(a)) continue;
          const dx = Math.min(ra.right, rb.right) - Math.max(ra.left, rb.left);
          const dy = Math.min(ra.bottom, rb.bottom) - Math.max(ra.top, rb.top);
          if (dx > 1 && dy > 1) problems.push(`${name}: "${a.textContent}" overlaps "${b.textContent}"`);
        }
    }
    const heat = f.querySelector('table.heat');
    if (heat && !f.querySelector('.legend .ramp')) problems.push(`${name}: a heatmap without a colour scale`);
  }
  // No overflow once everything is open.
  for (const d of document.querySelectorAll('details')) d.open = true;
  if (document.scrollingElement.scrollWidth > W) problems.push(`the page scrolls sideways: ${document.scrollingElement.scrollWidth} px wide in ${W}`);
  const scrolls = (el) => { for (let p = el.parentElement; p; p = p.parentElement) { const o = getComputedStyle(p).overflowX; if (o === 'auto' || o === 'scroll') return true; } return false; };
  for (const el of document.body.querySelectorAll('*')) {
    if (!visible(el) || scrolls(el)) continue;
    const r = el.getBoundingClientRect();
    if (r.right > W + 0.5) { problems.push(`<${el.tagName.toLowerCase()} class="${el.getAttribute('class') || ''}"> reaches ${Math.round(r.right)} px of ${W}`); break; }
  }
  // Readable text.
  let smallest = 1e9, where = '';
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const n = walker.currentNode;
    if (!n.textContent.trim()) continue;
    const el = n.parentElement;
    if (!visible(el)) continue;
    let px = parseFloat(getComputedStyle(el).fontSize);
    const svg = el.closest('svg');
    if (svg) px *= svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
    if (px < smallest) { smallest = px; where = n.textContent.trim().slice(0, 40); }
  }
  if (smallest < 12) problems.push(`text at ${smallest.toFixed(1)} px ("${where}")`);
  // Contrast of every HTML text against the first opaque background behind it.
  const rgba = (s) => {
    const n = s.match(/[\d.]+/g).map(Number);
    if (s.startsWith('color(')) return [n[0] * 255, n[1] * 255, n[2] * 255, n.length > 3 ? n[3] : 1];
    return [n[0], n[1], n[2], n.length > 3 ? n[3] : 1];
  };
  const lum = ([r, g, b]) => { const f = (c) => { c /= 255; return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; }; return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b); };
  const ratio = (x, y) => (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05);
  const behind = (el) => { for (let p = el; p; p = p.parentElement) { const c = rgba(getComputedStyle(p).backgroundColor); if (c[3] > 0.99) return c; } return [255, 255, 255, 1]; };
  let worst = 1e9, worstWhere = '';
  const texts = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (texts.nextNode()) {
    const n = texts.currentNode, el = n.parentElement;
    if (!n.textContent.trim() || !visible(el) || el.closest('svg')) continue;
    const r = ratio(lum(rgba(getComputedStyle(el).color)), lum(behind(el)));
    if (r < worst) { worst = r; worstWhere = n.textContent.trim().slice(0, 40); }
  }
  if (worst < 4.5) problems.push(`text contrast ${worst.toFixed(2)} < 4.5 ("${worstWhere}")`);
  const bg = lum(rgba(getComputedStyle(document.body).backgroundColor));
  // Self-contained: nothing that could load.
  if (document.querySelector('script')) problems.push('the page has a script');
  for (const el of document.querySelectorAll('[src],link[href],[href^=http]')) problems.push(`external reference: ${el.outerHTML.slice(0, 80)}`);
  return {problems, smallest, contrast: worst, background: bg, width: document.scrollingElement.scrollWidth};
}
"""


def chromium() -> str:
    found = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        sys.exit("check_report.py: no chromium on PATH (scripts/test.sh installs Debian's chromium)")
    return found


def main() -> int:
    report, shots = Path(sys.argv[1]).resolve(), Path(sys.argv[2])
    shots.mkdir(parents=True, exist_ok=True)
    failures: list[str] = []
    measured = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        try:
            for width, height in VIEWPORTS:
                for scheme in ("light", "dark"):
                    where = f"{width}x{height} {scheme}"
                    page = browser.new_page(viewport={"width": width, "height": height}, color_scheme=scheme)
                    requests: list[str] = []

                    def route(r, seen=requests):
                        if r.request.url != report.as_uri():
                            seen.append(r.request.url)
                            r.abort()
                        else:
                            r.continue_()

                    page.route("**/*", lambda r: route(r))
                    refused: list[str] = []
                    page.on(
                        "console",
                        lambda m, seen=refused: seen.append(m.text)
                        if "Content Security Policy" in m.text or m.text.startswith("Refused to")
                        else None,
                    )
                    page.goto(report.as_uri(), wait_until="load")
                    if scheme == "light":
                        page.screenshot(path=str(shots / f"report-{width}x{height}.png"))
                    elif (width, height) == VIEWPORTS[0]:
                        page.screenshot(path=str(shots / f"report-{width}x{height}-dark.png"))
                    result = page.evaluate(CHECKS)
                    measured[where] = {k: v for k, v in result.items() if k != "problems"}
                    failures += [f"{where}: {p}" for p in result["problems"]]
                    failures += [f"{where}: a request to {u}" for u in requests]
                    failures += [f"{where}: a load the page's policy refused: {m}" for m in refused]
                    if scheme == "dark" and result["background"] > 0.2:
                        failures.append(f"{where}: the dark scheme has a light background")
                    if scheme == "light" and result["background"] < 0.5:
                        failures.append(f"{where}: the light scheme has a dark background")
                    page.close()
        finally:
            browser.close()
    print(json.dumps(measured))
    for f in failures:
        print(f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
