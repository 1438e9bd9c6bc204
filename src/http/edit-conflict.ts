import { AppError } from './errors.ts';

/** What a field of an edit form is called in a conflict's message. */
const FIELD_LABELS: Record<string, string> = {
  email: 'The email address', full_name: 'The full name', role: 'The role',
  client_name: 'The name', callback_url: 'The callback URL', initiate_login_uri: 'The initiate-login URL', allowed_ips: 'The allow list', logo_url: 'The logo',
  url: 'The receiver URL', events: 'The events',
};

/**
 * 409 edit_conflict: `field` was changed by someone else since the page that edits it was
 * shown (the panel's edit forms, src/admin/panel-common.ts editedFields).
 */
export function editConflict(field: string): AppError {
  const label = FIELD_LABELS[field] ?? field;
  return new AppError(409, 'edit_conflict', `${label} ${field === 'events' ? 'were' : 'was'} changed by someone else since this page was opened. `
    + 'The page now shows what is saved; save again to replace it with yours.', { extra: { field } });
}

/**
 * Refuses the save of a field whose saved value (`before`, read under the row's lock) is
 * neither what the editing page showed (`shown`) nor what is being saved (`after`).
 */
export function refuseEditConflicts<K extends string>(
  shown: Partial<Record<K, string>> | undefined, before: Record<K, string>, after: Partial<Record<K, string>>,
  same: (field: K, a: string, b: string) => boolean = (_f, a, b) => a === b,
): void {
  if (!shown) return;
  for (const field of Object.keys(shown) as K[]) {
    const was = shown[field];
    const now = after[field];
    if (was === undefined || now === undefined) continue;
    if (!same(field, before[field], was) && !same(field, before[field], now)) throw editConflict(field);
  }
}
