// The package ships no types; the test narrows its result to the families it checks.
declare module 'parse-prometheus-text-format' {
  export default function parsePrometheusTextFormat(text: string): unknown[];
}
