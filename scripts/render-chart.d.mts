/** A template that uses syntax or functions outside the supported subset, or fails to render. */
export declare class TemplateError extends Error {}

/** One rendered manifest. */
export interface RenderedManifest {
  /** `<chart>/templates/<file>`. */
  source: string
  /** The YAML document. */
  text: string
}

/** Renders every template of the chart in `chartDir`; `values` is merged over values.yaml. */
export declare function renderChart(
  chartDir: string,
  options?: { values?: Record<string, unknown>; releaseName?: string; namespace?: string },
): RenderedManifest[]
