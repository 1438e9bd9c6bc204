import { z } from 'zod';
import { writeAudit } from '../audit/writer.ts';
import { hashPassword, passwordProblem } from '../auth/passwords.ts';
import type { Actor } from '../clients/service.ts';
import type { Deps } from '../deps.ts';
import { AppError } from '../http/errors.ts';
import { clearLoginAttempts, insertUser, setUserActive, type UserRecord } from './queries.ts';
import { normalizeUsername } from './username.ts';

const USERNAME = /^[\p{L}\p{N}._@+-]{1,64}$/u;

/** User administration shared by the command line and the admin API. */
export function createUserService(deps: Pick<Deps, 'db' | 'config'>) {
  const { db, config } = deps;
  return {
    /** Creates a user with a bcrypt-hashed password; 409 when the (normalized) name is taken. */
    async createUser(
      input: { username: string; email: string; password: string; role?: string; fullName?: string; active?: boolean },
      actor: Actor,
    ): Promise<UserRecord> {
      const username = normalizeUsername(input.username);
      if (!USERNAME.test(username)) {
        throw new AppError(400, 'invalid_username', 'username: 1-64 letters, digits or . _ @ + -');
      }
      if (!z.email().safeParse(input.email).success) throw new AppError(400, 'invalid_email', 'email is not a valid address');
      const problem = passwordProblem(input.password);
      if (problem) throw new AppError(400, 'invalid_password', `password ${problem}`);
      const passwordHash = await hashPassword(input.password, config.BCRYPT_COST);
      return db.transaction(async (tx) => {
        const taken = await tx.query('SELECT 1 FROM users WHERE username = $1', [username]);
        if (taken.rowCount > 0) throw new AppError(409, 'username_taken', `The username ${username} is taken`);
        const user = await insertUser(tx, {
          username,
          email: input.email.trim(),
          role: input.role ?? 'user',
          fullName: input.fullName ?? '',
          passwordHash,
          active: input.active ?? true,
        });
        await writeAudit(tx, {
          action: 'user.create', outcome: 'success', userId: user.id, username,
          ipAddress: actor.ipAddress ?? null, details: { via: actor.via, actor: actor.username ?? null },
        });
        return user;
      });
    },

    /** Activates or deactivates a user by username. */
    async setActive(rawUsername: string, active: boolean, actor: Actor): Promise<UserRecord> {
      const username = normalizeUsername(rawUsername);
      return db.transaction(async (tx) => {
        const user = await setUserActive(tx, username, active);
        if (!user) throw new AppError(404, 'user_not_found', `No user ${username}`);
        await writeAudit(tx, {
          action: active ? 'user.activate' : 'user.deactivate', outcome: 'success', userId: user.id, username,
          details: { via: actor.via, actor: actor.username ?? null },
        });
        return user;
      });
    },

    /** Clears the lockout of a login name (whether or not such a user exists). */
    async unlock(rawUsername: string, actor: Actor): Promise<{ username: string }> {
      const username = normalizeUsername(rawUsername);
      await db.transaction(async (tx) => {
        await clearLoginAttempts(tx, username);
        await writeAudit(tx, { action: 'user.unlock', outcome: 'success', username, details: { via: actor.via, actor: actor.username ?? null } });
      });
      return { username };
    },
  };
}

export type UserService = ReturnType<typeof createUserService>;
