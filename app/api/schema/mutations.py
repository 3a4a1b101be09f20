"""Mutation root. Each mutation is one transaction; side effects travel via the outbox."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Annotated

import strawberry
from redis.exceptions import RedisError
from sqlalchemy.ext.asyncio import AsyncSession
from strawberry.types import Info

from app.api.schema import media
from app.api.schema.context import Context
from app.api.schema.engagement import ClientEngagement
from app.api.schema.types import AuthPayload, Comment, MediaInput, Post, Upload, User, Visibility
from app.auth import revocation
from app.auth.account import change_password
from app.auth.guesses import Guesses, GuessLimits
from app.auth.hashes import spend_hashes
from app.auth.tokens import issue_token, token_claims
from app.config import canary_handle_prefix
from app.db import models, regions
from app.engagement import client as client_events
from app.engagement.kinds import Kind
from app.errors import NotFound, Unauthenticated
from app.feed import impressions
from app.posts import service as posts
from app.posts.ids import parse_post_id
from app.ratelimit import check_rates, check_windows, login_budgets, signup_budgets
from app.social import comments, engagement, feedback, graph
from app.users import service as users


def _post_id(raw: strawberry.ID) -> int:
    post_id = parse_post_id(str(raw))
    if post_id is None:
        raise NotFound("No such post.")
    return post_id


async def _writer(info: Info[Context, None], home: bool = True) -> int:
    """The viewer, allowed a write. `home`: a write of rows homed in the user's region
    (posts, graph, engagement, profile), refused WRONG_REGION elsewhere (decision 0087); the
    region-local reports (impressions, engagement) are accepted wherever the reader is."""
    viewer_id = info.context.require_viewer()
    if home:
        regions.check_home(info.context.state.settings, viewer_id)  # the id's bits: no lookup
    await info.context.limit_writes()
    return viewer_id


async def _issue(info: Info[Context, None], user_id: int, version: int = 0) -> str:
    """A new token, vouched for in Redis at once (its first uses read no PostgreSQL:
    app.auth.revocation)."""
    state = info.context.state
    token = issue_token(state.settings, user_id, version)
    await revocation.vouch(state.roles.limits, token_claims(state.settings, token))
    return token


GraphChange = Callable[[AsyncSession, int, models.User], Awaitable[bool]]


async def _change_graph(info: Info[Context, None], handle: str, change: GraphChange) -> User:
    """Follow/unfollow/block/unblock: one transaction, the target returned with new counts
    (none across a block: app.api.schema.social.profile)."""
    viewer_id = await _writer(info)
    async with info.context.transaction() as session:
        target = await graph.require_user(session, handle)
        await change(session, viewer_id, target)
        await session.refresh(target)
        hidden = bool(await graph.across_block(session, viewer_id, [target.id]))
    await info.context.narrowed([viewer_id])  # the viewer's graph: read on the primary first
    return User(row=target, graph_hidden=hidden)


LikeChange = Callable[[AsyncSession, int, int], Awaitable[models.Post | None]]


async def _engage(
    info: Info[Context, None], raw_id: strawberry.ID, change: LikeChange, *, liked: bool
) -> Post:
    """Like/unlike: one transaction; the answer's viewerHasLiked needs no query. An unlike
    of a post hidden from the viewer now is committed, then answered NOT_FOUND."""
    viewer_id = await _writer(info)
    async with info.context.transaction() as session:
        post = await change(session, viewer_id, _post_id(raw_id))
    await info.context.narrowed([viewer_id])  # the viewer's like and count: read-your-writes
    # Committed: logged (no I/O, app.engagement), also an unlike of a post hidden now.
    author_id = post.author_id if post is not None else None
    kind = Kind.LIKE if liked else Kind.UNLIKE
    info.context.state.engagement.append(kind, viewer_id, _post_id(raw_id), author_id)
    if post is None:
        raise NotFound("No such post.")
    info.context.loaders.viewer_liked_post.prime(post.id, liked)
    return Post(row=post)


PostFeedback = Callable[[AsyncSession, int, int, int], Awaitable[tuple[models.Post, bool]]]


async def _feedback_on_post(
    info: Info[Context, None], raw_id: strawberry.ID, change: PostFeedback, kind: Kind
) -> None:
    """hidePost/showFewerLikeThis: one transaction, then the post leaves the live count; a
    change (not a repeat) goes to the engagement log."""
    viewer_id = await _writer(info)
    state = info.context.state
    post_id = _post_id(raw_id)
    async with info.context.transaction() as session:
        post, made = await change(
            session, viewer_id, post_id, state.settings.feedback_max_hidden_posts
        )
    await info.context.narrowed([viewer_id])  # hidden from the viewer's pages
    if made:
        state.engagement.append(kind, viewer_id, post_id, post.author_id)
        if kind == Kind.FEWER:  # a ranking feature read with the viewer's context
            await state.feed.context_changed(viewer_id)
    await feedback.live_count_hidden(state.roles.pubsub, viewer_id, [post_id], state.settings)


@strawberry.type
class Mutation:
    @strawberry.mutation
    async def sign_up(
        self, info: Info[Context, None], handle: str, password: str, display_name: str | None = None
    ) -> AuthPayload:
        # Budgets per client address whatever token is sent: a new account's token must
        # not bring a fresh budget for the next one (decision 0020).
        ctx, settings = info.context, info.context.state.settings
        ip = ctx.client_ip()
        await check_windows(
            ctx.state.roles.limits,
            signup_budgets(
                ip,
                settings.rate_limit_writes_per_minute,
                settings.rate_limit_signups_per_ip_per_hour,
                settings.rate_limit_signups_per_ip_per_day,
            ),
        )
        # Its hash from the address's (and the new handle's) Argon2 budget (app.auth.hashes).
        await spend_hashes(ctx.state.roles.limits, settings, handle, ip)
        user = await users.sign_up(
            ctx.transaction,
            handle,
            password,
            display_name,
            ctx.state.passwords,
            canary_handle_prefix(settings.secret_key),
        )
        # The owner's address from the start: strangers' failed log-ins do not hold it.
        await Guesses(ctx.state.roles.limits, GuessLimits.of(settings)).remember(user.handle, ip)
        # A new account follows nobody: its (empty) timeline exists from the start. Without
        # Redis the account is still made; its first feed read rebuilds the timeline.
        with contextlib.suppress(RedisError, OSError):
            await ctx.state.timelines.rebuild(user.id, [])
        return AuthPayload(token=await _issue(info, user.id), user=User(row=user))

    @strawberry.mutation
    async def log_in(self, info: Info[Context, None], handle: str, password: str) -> AuthPayload:
        # Budgets per client IP and per (handle, IP) with a per-handle ceiling, whatever
        # token is sent: tokens of throwaway accounts buy no more guesses at one victim's
        # password, and strangers' failures do not lock the owner out (decision 0020).
        ctx, settings = info.context, info.context.state.settings
        ip = ctx.client_ip()
        await check_rates(
            ctx.state.roles.limits, login_budgets(ip, settings.rate_limit_login_per_ip_per_minute)
        )
        guesses = Guesses(ctx.state.roles.limits, GuessLimits.of(settings))
        async with guesses.attempt(handle, ip, wrong=Unauthenticated):
            # The account's and the address's Argon2 budgets (app.auth.hashes); a refusal
            # gives the guess back. The hash runs outside any transaction.
            await spend_hashes(ctx.state.roles.limits, settings, handle, ip)
            user = await users.log_in(ctx.transaction, handle, password, ctx.state.passwords)
        # Back after a while (or Redis lost the timeline): rebuild it now, bounded. Without
        # Redis the log-in still succeeds; the feed then reads from PostgreSQL (degraded).
        with contextlib.suppress(RedisError, OSError):
            await ctx.state.activity.touch(user.id, force=True)
        token = await _issue(info, user.id, user.token_version)
        return AuthPayload(token=token, user=User(row=user))

    @strawberry.mutation(
        description="Start an image upload (JPEG, PNG, WebP or GIF, at most MEDIA_MAX_BYTES): "
        "PUT the bytes to the answer's url with its headers, then attach its id with "
        "createPost's media. Counted against the day's upload budgets."
    )
    async def create_upload(
        self,
        info: Info[Context, None],
        content_type: str,
        byte_size: int,
        sha256: str | None = None,
    ) -> Upload:
        viewer_id = await _writer(info)
        return await media.create_upload(info.context, viewer_id, content_type, byte_size, sha256)

    @strawberry.mutation
    async def create_post(
        self,
        info: Info[Context, None],
        body: str,
        visibility: Visibility | None = Visibility.PUBLIC,
        idempotency_key: str | None = None,
        media_inputs: Annotated[
            list[MediaInput] | None,
            strawberry.argument(
                name="media",
                description="Up to 4 images: uploads of the caller's (createUpload), in order.",
            ),
        ] = None,
    ) -> Post:
        viewer_id = await _writer(info)
        settings = info.context.state.settings
        items = media.checked_items(media_inputs or [], settings.media_alt_max_chars)
        async with info.context.transaction() as session:
            attach = media.Attachment(info.context, session, viewer_id, items)
            post = await posts.create_post(
                session,
                viewer_id,
                body,
                models.Visibility((visibility or Visibility.PUBLIC).value),
                idempotency_key,
                settings.max_body_chars,
                settings.idempotency_key_ttl_seconds,
                allow_empty=bool(items),
                on_created=attach.run if items else None,
            )
        await attach.after_commit()
        await info.context.narrowed([viewer_id])  # the viewer's own post on their next page
        await info.context.state.feed.context_changed(viewer_id)  # own posts: read-your-writes
        return Post(row=post)

    @strawberry.mutation
    async def edit_post(self, info: Info[Context, None], id: strawberry.ID, body: str) -> Post:
        viewer_id = await _writer(info)
        settings = info.context.state.settings
        async with info.context.transaction() as session:
            post = await posts.edit_post(
                session, viewer_id, _post_id(id), body, settings.max_body_chars
            )
        await info.context.narrowed([viewer_id], [viewer_id])  # no page shows the older body
        return Post(row=post)

    @strawberry.mutation
    async def set_post_visibility(
        self, info: Info[Context, None], id: strawberry.ID, visibility: Visibility
    ) -> Post:
        viewer_id = await _writer(info)
        settings = info.context.state.settings
        async with info.context.transaction() as session:
            post = await posts.set_visibility(
                session,
                viewer_id,
                _post_id(id),
                models.Visibility(visibility.value),
                settings.fanout_widenings_per_post_per_hour,
            )
        await info.context.narrowed([viewer_id], [viewer_id])  # a narrowing, for every viewer
        return Post(row=post)

    @strawberry.mutation
    async def delete_post(self, info: Info[Context, None], id: strawberry.ID) -> bool:
        viewer_id = await _writer(info)
        async with info.context.transaction() as session:
            await posts.delete_post(session, viewer_id, _post_id(id))
        await info.context.narrowed([viewer_id], [viewer_id])  # the tombstone, for every viewer
        return True

    @strawberry.mutation
    async def follow(self, info: Info[Context, None], handle: str) -> User:
        since = graph.live_counts_clock()  # the target's posts from now on count live
        user = await _change_graph(info, handle, graph.follow)
        state, viewer = info.context.state, info.context.require_viewer()
        await state.feed.context_changed(viewer)  # the new followee is pulled at once
        if not await info.context.loaders.viewer_mutes_user.load(user.row.id):
            await graph.live_counts_resumed(  # (a muted followee stays out of the count)
                state.roles.pubsub, viewer, user.row.id, since, state.settings
            )
        return user

    @strawberry.mutation
    async def unfollow(self, info: Info[Context, None], handle: str) -> User:
        user = await _change_graph(info, handle, graph.unfollow)
        state, viewer = info.context.state, info.context.require_viewer()
        await state.feed.context_changed(viewer)
        await graph.live_counts_stopped(
            state.roles.pubsub, state.sessions, [(viewer, user.row.id)], state.settings
        )
        return user

    @strawberry.mutation
    async def block(self, info: Info[Context, None], handle: str) -> User:
        user = await _change_graph(info, handle, graph.block)
        state, viewer, other = info.context.state, info.context.require_viewer(), user.row.id
        await info.context.narrowed([other])  # both ways: the blocked user's view too
        await state.feed.context_changed(viewer)
        await state.feed.context_changed(other)  # the block ended their follow of the viewer
        pairs = [(viewer, other), (other, viewer)]  # both ways: a block cuts both follows
        await graph.live_counts_stopped(state.roles.pubsub, state.sessions, pairs, state.settings)
        return user

    @strawberry.mutation
    async def unblock(self, info: Info[Context, None], handle: str) -> User:
        user = await _change_graph(info, handle, graph.unblock)
        await info.context.state.feed.context_changed(info.context.require_viewer())
        return user

    @strawberry.mutation(
        description="Hide a post you can see from your feeds and live count (not from the "
        "author's profile or by id). Idempotent; true."
    )
    async def hide_post(self, info: Info[Context, None], id: strawberry.ID) -> bool:
        await _feedback_on_post(info, id, feedback.hide_post, Kind.HIDE)
        return True

    @strawberry.mutation(description="Show a hidden post in your feeds again. Idempotent; true.")
    async def unhide_post(self, info: Info[Context, None], id: strawberry.ID) -> bool:
        viewer_id = await _writer(info)
        async with info.context.transaction() as session:
            await feedback.unhide_post(session, viewer_id, _post_id(id))
        await info.context.narrowed([viewer_id])
        # The open session was ranked without it: the next first page ranks afresh here.
        info.context.state.feed.open_sessions.forget(viewer_id)
        return True

    @strawberry.mutation(
        description="Hide the post and show fewer of its author's posts (a ranking signal). "
        "Idempotent per post; true."
    )
    async def show_fewer_like_this(self, info: Info[Context, None], post_id: strawberry.ID) -> bool:
        await _feedback_on_post(info, post_id, feedback.show_fewer, Kind.FEWER)
        return True

    @strawberry.mutation(
        description="Mute a user: none of their posts in your feeds or live count. Not a "
        "block: follows stay, and they are told nothing. Idempotent."
    )
    async def mute_author(self, info: Info[Context, None], handle: str) -> User:
        state = info.context.state
        cap = state.settings.feedback_max_mutes

        async def change(session: AsyncSession, viewer_id: int, target: models.User) -> bool:
            return await feedback.mute(session, viewer_id, target, cap)

        user = await _change_graph(info, handle, change)
        viewer = info.context.require_viewer()
        info.context.loaders.viewer_mutes_user.prime(user.row.id, True)
        state.engagement.append(Kind.MUTE, viewer, author_id=user.row.id)
        # As an unfollow: out of the live count now, and no batch queued before counts them.
        pairs = [(viewer, user.row.id)]
        await graph.live_counts_stopped(state.roles.pubsub, state.sessions, pairs, state.settings)
        return user

    @strawberry.mutation(description="Unmute a user: their posts from now on count live again.")
    async def unmute_author(self, info: Info[Context, None], handle: str) -> User:
        since = graph.live_counts_clock()  # their posts from now on count live, as on follow
        user = await _change_graph(info, handle, feedback.unmute)
        state, viewer = info.context.state, info.context.require_viewer()
        info.context.loaders.viewer_mutes_user.prime(user.row.id, False)
        state.feed.open_sessions.forget(viewer)  # ranked without their posts: rank afresh
        await graph.live_counts_resumed(
            state.roles.pubsub, viewer, user.row.id, since, state.settings
        )
        return user

    @strawberry.mutation
    async def like_post(self, info: Info[Context, None], id: strawberry.ID) -> Post:
        return await _engage(info, id, engagement.like, liked=True)

    @strawberry.mutation
    async def unlike_post(self, info: Info[Context, None], id: strawberry.ID) -> Post:
        return await _engage(info, id, engagement.unlike, liked=False)

    @strawberry.mutation
    async def add_comment(
        self,
        info: Info[Context, None],
        post_id: strawberry.ID,
        body: str,
        idempotency_key: str | None = None,
    ) -> Comment:
        viewer_id = await _writer(info)
        settings = info.context.state.settings
        async with info.context.transaction() as session:
            comment = await engagement.add_comment(
                session,
                viewer_id,
                _post_id(post_id),
                body,
                settings.max_comment_chars,
                idempotency_key,
                settings.idempotency_key_ttl_seconds,
            )
        info.context.state.engagement.append(  # committed: logged (a replayed key again)
            Kind.COMMENT, viewer_id, comment.post_id, comment.post_author_id
        )
        return Comment(row=comment)

    @strawberry.mutation(description="Delete a comment: its author or the post's author.")
    async def delete_comment(self, info: Info[Context, None], id: strawberry.ID) -> bool:
        viewer_id = await _writer(info)
        comment_id = comments.parse_comment_id(str(id))
        if comment_id is None:
            raise NotFound("No such comment.")
        async with info.context.transaction() as session:
            await comments.delete_comment(session, viewer_id, comment_id)
        return True

    @strawberry.mutation(description="Change the viewer's display name (1-80 characters).")
    async def update_profile(self, info: Info[Context, None], display_name: str) -> User:
        viewer_id = await _writer(info)
        async with info.context.transaction() as session:
            user = await users.update_profile(session, viewer_id, display_name)
        await info.context.narrowed([viewer_id], [viewer_id])  # pages show the new name at once
        info.context.loaders.user_by_id.prime(user.id, user)
        return User(row=user)

    @strawberry.mutation(
        description="Turn the recommendations of the viewer's RANKED feed on or off "
        "(CHRONOLOGICAL never has any). The next first page follows it."
    )
    async def set_recommendations(self, info: Info[Context, None], enabled: bool) -> User:
        viewer_id = await _writer(info)
        async with info.context.transaction() as session:
            user = await users.set_recommendations(session, viewer_id, enabled)
        await info.context.narrowed([viewer_id])  # the context read afresh has the setting
        info.context.loaders.user_by_id.prime(user.id, user)
        # The setting is read with the viewer's context (app.feed.rows): read it afresh.
        await info.context.state.feed.context_changed(viewer_id)
        return User(row=user)

    @strawberry.mutation(
        description="Change the viewer's password; every token issued before stops working."
    )
    async def change_password(
        self, info: Info[Context, None], old_password: str, new_password: str
    ) -> AuthPayload:
        """Every token issued before this call stops working (the returned one is new)."""
        viewer_id = await _writer(info)
        state = info.context.state
        # Wrong old passwords count as guesses at the account, as logIn's failures do.
        guesses = Guesses(state.roles.limits, GuessLimits.of(state.settings))
        user, version = await change_password(
            info.context.transaction,
            viewer_id,
            old_password,
            new_password,
            guesses,
            info.context.client_ip(),
            state.passwords,
            state.settings,
        )
        # Redis down: written when it is back (revocation.retries); meanwhile every check
        # reads the version from PostgreSQL.
        await revocation.publish_version(state.roles.limits, viewer_id, version)
        return AuthPayload(token=await _issue(info, user.id, version), user=User(row=user))

    @strawberry.mutation(
        description="Revoke the token this request carries; the viewer's other sessions stay."
    )
    async def log_out(self, info: Info[Context, None]) -> bool:
        """Revokes the token this request was sent with; the user's other tokens stay valid."""
        info.context.require_viewer()
        token = info.context.token
        if token is None:  # a socket's operation: it was authenticated at connection_init
            raise Unauthenticated("Log out over HTTP, with the token to revoke.")
        # Recorded in PostgreSQL first: a Redis that loses it reads it back (decision 0066).
        state = info.context.state
        await revocation.revoke(state.roles.limits, state.sessions, token)
        return True

    @strawberry.mutation(
        description="Posts the client showed the viewer (at most 100): RANKED puts posts "
        "already seen after unseen ones on the next refresh. Recorded in the background."
    )
    async def report_impressions(
        self, info: Info[Context, None], post_ids: list[strawberry.ID]
    ) -> bool:
        viewer_id = await _writer(info, home=False)
        ids = impressions.reported_ids(post_ids)
        info.context.state.feed.impressions.record(viewer_id, ids)
        info.context.state.engagement.record(Kind.SEEN, viewer_id, ids)
        return True

    @strawberry.mutation(
        description="Events of posts the client showed the viewer (at most 100 ids): CLICK, "
        "RECOMMENDATION_SHOWN; appended to the engagement log in the background."
    )
    async def report_engagement(
        self,
        info: Info[Context, None],
        kind: ClientEngagement,
        post_ids: list[strawberry.ID],
        session_id: strawberry.ID | None = None,
    ) -> bool:
        viewer_id = await _writer(info, home=False)
        ids = client_events.reported_posts(post_ids)
        session = client_events.session_label(None if session_id is None else str(session_id))
        info.context.state.engagement.record(
            client_events.CLIENT_KINDS[kind.value], viewer_id, ids, session_id=session
        )
        return True
