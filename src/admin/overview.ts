// The overview's numbers are one statement of the administration's read model (./queries.ts).
export { type Overview, readOverview } from './queries.ts';
