"""An SVG bar chart of --bench latencies, for people who would rather look than read."""

from __future__ import annotations

from xml.etree import ElementTree as ET

from compatcheck.report.model import Report

BAR, GAP, LABEL, WIDTH = 18, 6, 190, 420
COLOURS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52")


def latency_svg(report: Report) -> str | None:
    timings = [t for stage in report.stages for t in stage.timings]
    if not timings:
        return None
    slowest = max(t.p50_ms for t in timings) or 1.0
    height = len(timings) * (BAR + GAP) + 50
    svg = ET.Element("svg", xmlns="http://www.w3.org/2000/svg", width=str(LABEL + WIDTH + 110),
                     height=str(height), style="font-family:sans-serif;font-size:12px")
    ET.SubElement(svg, "text", x="4", y="16", style="font-weight:bold").text = "p50 latency per input set (ms)"
    for row, t in enumerate(timings):
        y = 30 + row * (BAR + GAP)
        ET.SubElement(svg, "text", x="4", y=str(y + BAR - 5)).text = f"{t.label} · set {t.input_set + 1}"
        length = max(1.0, WIDTH * t.p50_ms / slowest)
        ET.SubElement(svg, "rect", x=str(LABEL), y=str(y), width=f"{length:.1f}", height=str(BAR),
                      fill=COLOURS[t.input_set % len(COLOURS)])
        ET.SubElement(svg, "text", x=f"{LABEL + length + 4:.1f}", y=str(y + BAR - 5)).text = f"{t.p50_ms:.3f}"
    return ET.tostring(svg, encoding="unicode")
