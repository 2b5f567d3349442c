// AG-UI over the server (`POST /v1/agui`): a `RunAgentInput` starts or resumes a run, and the run's stored events
// stream back as `@ag-ui/core` events; approvals and `moss.ask` end a run with interrupts, answered by `resume`.
export { type AguiRouteOptions, registerAguiRoute } from "./agui-route.ts";
