// Type-checks an integrator's use of the TypeScript types openapi-typescript generates from the
// OpenAPI document (.ci/contract writes them to out/typescript/schema.ts, then runs
// `tsc --noEmit --strict` on this file): bodies, query parameters, responses and problems.
import type { components, paths } from "./out/typescript/schema";

type Appointment = components["schemas"]["Appointment"];

export const body: components["schemas"]["AppointmentInput"] = {
  shop_id: 1,
  date: "2030-03-04 09:30",
  year: "2019",
  make: "Toyota",
  model: "Camry",
  home_phone: "",
  work_phone: "",
  cell_phone: "",
  source: null,
};

export const query: NonNullable<paths["/api/v1/appointments"]["get"]["parameters"]["query"]> = {
  "filter[shop_id]": 1,
  "filter[date]": "2030-03-04",
  with_details: true,
};

type Created = paths["/api/v1/appointments"]["post"]["responses"][201]["content"]["application/json"];
export const created = (a: Created): Appointment => a;
export const customerOf = (a: Appointment): number | undefined => a.customer?.customer_id;

type Invalid = paths["/api/v1/appointments/{id}"]["put"]["responses"][422]["content"]["application/problem+json"];
export const yearErrors = (p: Invalid): string[] | undefined => p.errors?.["year"];

export const zones = (r: components["schemas"]["DataList_String"]): string[] => r.data;
