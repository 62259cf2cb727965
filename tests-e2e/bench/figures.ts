// The figures a benchmark run records: each has a group, a unit, one value per round (a
// latency also its quantiles per round), and optionally the reference it is divided by and
// the goal it is held to. The summary is one result per figure, in the order the figures were
// first recorded: the median of its rounds, and its ratio to its reference's median.

import type { BenchGoal, BenchResult } from '@conch/protocol'
import { median, type Quantiles, quantiles } from './stats.ts'

interface Figure {
  group: string
  name: string
  unit: string
  /** Name of the figure this one is divided by for `ratioToBaseline`. */
  ref?: string
  /** The project's goal for this figure. */
  goal?: BenchGoal
  values: number[]
  quantiles: Quantiles[]
}

/** The figures of one benchmark run, by name. */
export class Figures {
  readonly #figures = new Map<string, Figure>()

  #figure(group: string, name: string, unit: string, ref?: string): Figure {
    let f = this.#figures.get(name)
    if (!f) {
      f = { group, name, unit, values: [], quantiles: [] }
      if (ref !== undefined) f.ref = ref
      this.#figures.set(name, f)
    }
    return f
  }

  /** Records one round's value of a figure. */
  recordValue(group: string, name: string, unit: string, value: number, ref?: string): void {
    this.#figure(group, name, unit, ref).values.push(value)
  }

  /** Records one round's latency samples of a figure (in ms): its quantiles, p50 as the value. */
  recordLatency(group: string, name: string, samples: number[], ref?: string): Quantiles {
    const q = quantiles(samples)
    const f = this.#figure(group, name, 'ms', ref)
    f.quantiles.push(q)
    f.values.push(q.p50)
    return q
  }

  /** Sets the goal of a figure already recorded (issue 12's performance goals). */
  setGoal(name: string, goal: BenchGoal): void {
    const f = this.#figures.get(name)
    if (f) f.goal = goal
  }

  /** One result per figure with values: medians across rounds, ratios to references, goals. */
  summarize(): BenchResult[] {
    const results: BenchResult[] = []
    for (const f of this.#figures.values()) {
      if (f.values.length === 0) continue
      const result: BenchResult = { group: f.group, name: f.name, unit: f.unit, value: median(f.values) }
      if (f.quantiles.length > 0) {
        result.p50 = median(f.quantiles.map((q) => q.p50))
        result.p90 = median(f.quantiles.map((q) => q.p90))
        result.p99 = median(f.quantiles.map((q) => q.p99))
      }
      const ref = f.ref === undefined ? undefined : this.#figures.get(f.ref)
      if (ref && ref.values.length > 0) {
        const base = median(ref.values)
        if (base > 0) {
          result.ratioToBaseline = result.value / base
          result.reference = ref.name
        }
      }
      if (f.goal) result.goal = f.goal
      results.push(result)
    }
    return results
  }
}
