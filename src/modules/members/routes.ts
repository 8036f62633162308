// Members and admin users of an account.
import { Type } from '@sinclair/typebox';
import type { App } from '../../http/types.ts';
import { AccountId, Envelope, errors, MAX_ACCOUNT_ID, Obj, Security } from '../../http/schemas.ts';
import type { MemberService } from './service.ts';

const tags = ['Accounts'];
const Member = Obj({ id: Type.Integer(), email: Type.String(), role: Type.String(), permittedAccountIds: Type.Array(Type.Integer()) });
const TargetAccount = { targetAccountId: Type.Optional(AccountId('Act on this descendant account instead of your own')) };
const MemberIds = Type.Array(Type.Integer({ minimum: 1, maximum: MAX_ACCOUNT_ID }), { maxItems: 1000 });

export async function memberRoutes(app: App, { members }: { members: MemberService }): Promise<void> {
  app.get('/api/v2/members', {
    schema: { operationId: 'listMembers', tags, security: Security, summary: 'List members of your account',
      querystring: Type.Object(TargetAccount), response: { 200: Envelope({ members: Type.Array(Member) }), ...errors(400, 403, 404) } },
  }, async (req) => members.list(req.scope, req.query.targetAccountId));

  app.get('/api/v2/member', {
    schema: { operationId: 'getMember', tags, security: Security, summary: 'Fetch one member',
      querystring: Type.Object({ targetMemberId: AccountId('Id of the member'), ...TargetAccount }),
      response: { 200: Envelope({ member: Member }), ...errors(400, 403, 404) } },
  }, async (req) => members.get(req.scope, req.query.targetMemberId, req.query.targetAccountId));

  app.post('/api/v2/member', {
    schema: { operationId: 'inviteMember', tags, security: Security,
      summary: 'Invite a member (recorded; callplane sends no e-mail)',
      querystring: Type.Object(TargetAccount),
      body: Type.Object({
        email: Type.String({ maxLength: 320 }), redirectUrl: Type.Optional(Type.String({ maxLength: 2000 })),
        role: Type.Optional(Type.String({ maxLength: 32 })), permittedAccountIds: Type.Optional(MemberIds),
        sendWelcomeEmail: Type.Optional(Type.Boolean()),
      }),
      response: { 201: Envelope({ member: Member }), ...errors(400, 403, 404, 409) } },
  }, async (req, reply) => reply.status(201).send(await members.invite(req.scope, req.body, req.query.targetAccountId)));

  app.put('/api/v2/member', {
    schema: { operationId: 'updateMember', tags, security: Security, summary: 'Update a member',
      querystring: Type.Object(TargetAccount),
      body: Type.Object({
        targetMemberId: AccountId('Id of the member to update'), email: Type.Optional(Type.String({ maxLength: 320 })),
        role: Type.Optional(Type.String({ maxLength: 32 })), permittedAccountIds: Type.Optional(MemberIds),
      }),
      response: { 201: Envelope({ member: Member }), ...errors(400, 403, 404, 409) } },
  }, async (req, reply) => reply.status(201).send(await members.update(req.scope, req.body, req.query.targetAccountId)));

  app.delete('/api/v2/member', {
    schema: { operationId: 'deleteMember', tags, security: Security, summary: 'Remove a member',
      querystring: Type.Object(TargetAccount),
      body: Type.Object({ targetMemberId: AccountId('Id of the member to remove') }),
      response: { 201: Envelope({}), ...errors(400, 403, 404) } },
  }, async (req, reply) => reply.status(201).send(await members.remove(req.scope, req.body.targetMemberId, req.query.targetAccountId)));

  app.get('/api/v2/listAdminUsers', {
    schema: { operationId: 'listAdminUsers', tags, security: Security, summary: 'List admin users',
      querystring: Type.Object(TargetAccount), response: { 200: Envelope({ users: Type.Array(Member) }), ...errors(400, 403, 404) } },
  }, async (req) => members.listAdmins(req.scope, req.query.targetAccountId));

  app.post('/api/v2/inviteAdminUser', {
    schema: { operationId: 'inviteAdminUser', tags, security: Security, summary: 'Invite an admin user (recorded; no e-mail is sent)',
      querystring: Type.Object(TargetAccount),
      body: Type.Object({ email: Type.String({ maxLength: 320 }), redirectUrl: Type.Optional(Type.String({ maxLength: 2000 })) }),
      response: { 201: Envelope({ user: Member }), ...errors(400, 403, 404, 409) } },
  }, async (req, reply) => reply.status(201).send(await members.inviteAdmin(req.scope, req.body, req.query.targetAccountId)));

  app.delete('/api/v2/deleteAdminUser', {
    schema: { operationId: 'deleteAdminUser', tags, security: Security, summary: 'Delete an admin user',
      querystring: Type.Object(TargetAccount),
      body: Type.Object({ targetUserId: AccountId('User id of the admin user to remove') }),
      response: { 200: Envelope({}), ...errors(400, 403, 404) } },
  }, async (req) => members.removeAdmin(req.scope, req.body.targetUserId, req.query.targetAccountId));
}
