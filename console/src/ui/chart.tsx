// One chart library for the console: uPlot (small, fast, canvas). A chart always comes with its
// figures as a table for whoever cannot see it (screen readers, 400 % zoom).
import { useEffect, useRef } from 'react';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

export interface Series { label: string; values: number[]; color: string }

export function BarChart({ title, labels, series, height = 220 }: { title: string; labels: string[]; series: Series[]; height?: number }) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const xs = labels.map((_, i) => i);
    const bars = uPlot.paths.bars!({ size: [0.6, 40] });
    const plot = new uPlot({
      width: Math.max(240, el.clientWidth), height,
      legend: { show: true },
      scales: { x: { time: false } },
      axes: [{ values: (_u, ticks) => ticks.map((t) => labels[t] ?? '') }, {}],
      series: [{ label: 'Day' }, ...series.map((s) => ({ label: s.label, stroke: s.color, fill: `${s.color}88`, paths: bars }))],
    }, [xs, ...series.map((s) => s.values)], el);
    const resize = new ResizeObserver(() => plot.setSize({ width: Math.max(240, el.clientWidth), height }));
    resize.observe(el);
    return () => { resize.disconnect(); plot.destroy(); };
  }, [labels, series, height]);
  return (
    <figure className="chart">
      <figcaption>{title}</figcaption>
      <div ref={box} aria-hidden="true" />
      <details>
        <summary>{title}: figures</summary>
        <table>
          <thead><tr><th scope="col">Day</th>{series.map((s) => <th key={s.label} scope="col">{s.label}</th>)}</tr></thead>
          <tbody>{labels.map((l, i) => <tr key={l}><th scope="row">{l}</th>{series.map((s) => <td key={s.label}>{s.values[i]}</td>)}</tr>)}</tbody>
        </table>
      </details>
    </figure>
  );
}
