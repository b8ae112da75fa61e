"""Renders the HTML report in headless Chromium (Debian's `chromium`, driven by Playwright),
asserts on its DOM, and writes screenshots.

Usage: check_report.py REPORT.html SCREENSHOT_DIR

For each viewport (1366x768, 1920x1080) and colour scheme (light, dark) it checks:
- the page makes no request besides its own file (every other request is recorded and aborted);
- the answer comes first: the overall readiness and one summary card per rollout group are
  within the first screen, before any chart;
- every chart (`figure.chart`) has a title (its `figcaption`, which the chart names with
  aria-labelledby), a legend with at least one entry, and, when it draws axes (an SVG), axis
  titles; every bar has a Wilson whisker;
- once every <details> is opened, no element reaches past the viewport's right edge and the
  page does not scroll sideways; no SVG text falls outside its SVG;
- text reads at 100%: no visible text under 12 CSS px (SVG text measured as rendered);
- body text contrasts with the background (WCAG ratio >= 4.5) in both schemes, and the
  dark scheme is dark.

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
  if (cards.length && cards[0].getBoundingClientRect().top > H) problems.push('the first summary card is below the first screen');
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
      const bars = svg.querySelectorAll('.bar').length, whiskers = svg.querySelectorAll('.whisker').length;
      if (bars === 0) problems.push(`${name}: no bar`);
      if (bars !== whiskers) problems.push(`${name}: ${bars} bars but ${whiskers} interval whiskers`);
      const box = svg.getBoundingClientRect();
      for (const t of svg.querySelectorAll('text')) {
        const r = t.getBoundingClientRect();
        if (r.left < box.left - 1 || r.right > box.right + 1 || r.top < box.top - 1 || r.bottom > box.bottom + 1)
          problems.push(`${name}: text "${t.textContent}" falls outside its chart`);
      }
    }
    const heat = f.querySelector('table.heat');
    if (heat && !f.querySelector('.legend .ramp')) problems.push(`${name}: a heatmap without a colour scale`);
  }
  // No overflow once everything is open.
  for (const d of document.querySelectorAll('details')) d.open = true;
  if (document.scrollingElement.scrollWidth > W) problems.push(`the page scrolls sideways: ${document.scrollingElement.scrollWidth} px wide in ${W}`);
  for (const el of document.body.querySelectorAll('*')) {
    if (!visible(el)) continue;
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
  // Contrast.
  const rgb = (s) => s.match(/[\d.]+/g).slice(0, 3).map(Number);
  const lum = ([r, g, b]) => { const f = (c) => { c /= 255; return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; }; return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b); };
  const bs = getComputedStyle(document.body);
  const bg = lum(rgb(bs.backgroundColor)), fg = lum(rgb(bs.color));
  const ratio = (Math.max(bg, fg) + 0.05) / (Math.min(bg, fg) + 0.05);
  if (ratio < 4.5) problems.push(`body text contrast ${ratio.toFixed(2)} < 4.5`);
  // Self-contained: nothing that could load.
  if (document.querySelector('script')) problems.push('the page has a script');
  for (const el of document.querySelectorAll('[src],link[href],[href^=http]')) problems.push(`external reference: ${el.outerHTML.slice(0, 80)}`);
  return {problems, smallest, background: bg, width: document.scrollingElement.scrollWidth};
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
                    page.goto(report.as_uri(), wait_until="load")
                    if scheme == "light":
                        page.screenshot(path=str(shots / f"report-{width}x{height}.png"))
                    elif (width, height) == VIEWPORTS[0]:
                        page.screenshot(path=str(shots / f"report-{width}x{height}-dark.png"))
                    result = page.evaluate(CHECKS)
                    measured[where] = {k: v for k, v in result.items() if k != "problems"}
                    failures += [f"{where}: {p}" for p in result["problems"]]
                    failures += [f"{where}: a request to {u}" for u in requests]
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
