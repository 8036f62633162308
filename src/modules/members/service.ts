// Members and admin users of an account (partner, reseller or organization). callplane records
// invitations; it sends no e-mail (there is no mail transport), which the answers say.
import { ANCESTOR_COLUMN, type AccountRow, type Db, type UserRow } from '../../db/types.ts';
import { isUniqueViolation } from '../../db/errors.ts';
import { Conflict, Invalid, NotFound } from '../../http/errors.ts';
import type { Scope } from '../../http/auth.ts';
import { bool } from '../../db/flags.ts';
import { nowMs, toUnixSeconds } from '../../lib/time.ts';
import { memberRepo } from './repository.ts';
import { isEmail } from '../../lib/checks.ts';

const HOLDERS = ['partner', 'reseller', 'organization'] as const;
const ROLE = /^[a-z][a-z0-9_-]{0,31}$/;

export interface InviteInput {
  email: string; redirectUrl?: string; role?: string; permittedAccountIds?: number[]; sendWelcomeEmail?: boolean;
}
export interface UpdateMemberInput { targetMemberId: number; email?: string; role?: string; permittedAccountIds?: number[] }

export function presentMember(row: UserRow) {
  return {
    id: row.id,
    userId: row.id,
    accountId: row.account_id,
    email: row.email,
    role: row.role,
    permittedAccountIds: JSON.parse(row.permitted_account_ids) as number[],
    status: row.status,
    redirectUrl: row.redirect_url,
    sendWelcomeEmail: bool(row.send_welcome_email),
    invitedAt: toUnixSeconds(row.created_at),
    updatedAt: toUnixSeconds(row.updated_at),
  };
}

export function memberService(deps: { db: Db }) {
  const { db } = deps;

  async function holder(scope: Scope, targetAccountId?: number): Promise<AccountRow> {
    // An agent token is below every holder: 403 even when it names an account (its own included).
    scope.requireActor(HOLDERS, 'manage members');
    return scope.target(targetAccountId, HOLDERS);
  }

  function checkEmail(email: string): string {
    if (!isEmail(email)) throw new Invalid('email must be a valid email address');
    return email.toLowerCase();
  }

  // The link an invitation would carry: only a web address, never javascript: or data: URLs.
  function checkRedirectUrl(url: string | undefined): string | null {
    if (url === undefined) return null;
    let parsed: URL | undefined;
    try { parsed = new URL(url); } catch { /* reported below */ }
    if (!parsed || (parsed.protocol !== 'https:' && parsed.protocol !== 'http:')) {
      throw new Invalid('redirectUrl must be an http or https URL');
    }
    return url;
  }

  function checkRole(role: string | undefined): string {
    // Roles are compared as stored; 'Admin' and 'admin' must not become two roles.
    const r = role === undefined ? 'admin' : role.trim().toLowerCase();
    if (!ROLE.test(r)) throw new Invalid('role must be a short lowercase name such as admin or member');
    return r;
  }

  async function checkPermitted(scope: Scope, account: AccountRow, ids: number[] | undefined): Promise<string> {
    const unique = [...new Set(ids ?? [])];
    for (const id of unique) {
      const agent = await scope.account(id, ['agent'], 'permittedAccountIds');
      if (agent[ANCESTOR_COLUMN[account.kind]] !== account.id) throw new NotFound(`permittedAccountIds ${id} was not found`);
    }
    return JSON.stringify(unique);
  }

  async function invite(scope: Scope, account: AccountRow, input: InviteInput) {
    const now = nowMs();
    const email = checkEmail(input.email);
    try {
      return await memberRepo.insert(db, {
        account_id: account.id, email, role: checkRole(input.role),
        permitted_account_ids: await checkPermitted(scope, account, input.permittedAccountIds),
        redirect_url: checkRedirectUrl(input.redirectUrl), send_welcome_email: input.sendWelcomeEmail === false ? 0 : 1,
        status: 'invited', created_at: now, updated_at: now,
      });
    } catch (err) {
      if (isUniqueViolation(err)) throw new Conflict(`email ${email} is already a member of account ${account.id}`);
      throw err;
    }
  }

  async function remove(account: AccountRow, id: number, field: string) {
    if ((await memberRepo.delete(db, account.id, id)) === 0) throw new NotFound(`${field} ${id} was not found`);
  }

  return {
    async list(scope: Scope, targetAccountId?: number) {
      const account = await holder(scope, targetAccountId);
      return { success: true, message: 'Success', members: (await memberRepo.list(db, account.id)).map(presentMember) };
    },

    async get(scope: Scope, targetMemberId: number, targetAccountId?: number) {
      const account = await holder(scope, targetAccountId);
      const row = await memberRepo.find(db, account.id, targetMemberId);
      if (!row) throw new NotFound(`targetMemberId ${targetMemberId} was not found`);
      return { success: true, message: 'Success', member: presentMember(row) };
    },

    async invite(scope: Scope, input: InviteInput, targetAccountId?: number) {
      const account = await holder(scope, targetAccountId);
      const row = await invite(scope, account, input);
      return { success: true, message: 'Invitation sent', member: presentMember(row), emailSent: false };
    },

    async update(scope: Scope, input: UpdateMemberInput, targetAccountId?: number) {
      const account = await holder(scope, targetAccountId);
      const row = await memberRepo.find(db, account.id, input.targetMemberId);
      if (!row) throw new NotFound(`targetMemberId ${input.targetMemberId} was not found`);
      const patch: Partial<UserRow> = { updated_at: nowMs() };
      if (input.email !== undefined) patch.email = checkEmail(input.email);
      if (input.role !== undefined) patch.role = checkRole(input.role);
      if (input.permittedAccountIds !== undefined) patch.permitted_account_ids = await checkPermitted(scope, account, input.permittedAccountIds);
      if (Object.keys(patch).length === 1) throw new Invalid('nothing to update: send email, role or permittedAccountIds');
      try {
        const updated = await memberRepo.update(db, row.id, patch);
        return { success: true, message: 'Member updated', member: presentMember(updated!) };
      } catch (err) {
        if (isUniqueViolation(err)) throw new Conflict(`email ${patch.email} is already a member of account ${account.id}`);
        throw err;
      }
    },

    async remove(scope: Scope, targetMemberId: number, targetAccountId?: number) {
      const account = await holder(scope, targetAccountId);
      await remove(account, targetMemberId, 'targetMemberId');
      return { success: true, message: 'Member successfully removed from your organization' };
    },

    async listAdmins(scope: Scope, targetAccountId?: number) {
      const account = await holder(scope, targetAccountId);
      return { success: true, message: 'Success', users: (await memberRepo.list(db, account.id, 'admin')).map(presentMember) };
    },

    async inviteAdmin(scope: Scope, input: { email: string; redirectUrl?: string }, targetAccountId?: number) {
      const account = await holder(scope, targetAccountId);
      const row = await invite(scope, account, { ...input, role: 'admin' });
      return { success: true, message: 'Invitation sent', user: presentMember(row), emailSent: false };
    },

    async removeAdmin(scope: Scope, targetUserId: number, targetAccountId?: number) {
      const account = await holder(scope, targetAccountId);
      const row = await memberRepo.find(db, account.id, targetUserId);
      if (!row || row.role !== 'admin') throw new NotFound(`targetUserId ${targetUserId} is not an admin user of account ${account.id}`);
      await remove(account, targetUserId, 'targetUserId');
      return { success: true, message: 'Admin user successfully removed from your organization' };
    },
  };
}

export type MemberService = ReturnType<typeof memberService>;
