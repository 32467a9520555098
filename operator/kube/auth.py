"""Who is asking, and may they: TokenReview and SubjectAccessReview (the metrics endpoint)."""

from __future__ import annotations

from dataclasses import dataclass

from kubernetes import client


@dataclass(frozen=True)
class Identity:
    """Who a bearer token belongs to, as the API server's TokenReview says."""

    username: str
    uid: str
    groups: tuple[str, ...]
    extra: dict[str, list[str]]


@dataclass(frozen=True)
class Auth:
    """Calls to the authentication and authorization API groups."""

    api: client.ApiClient

    def review_token(self, *, token: str) -> Identity | None:
        """The identity behind `token` (TokenReview), or None when the API server does not
        accept it."""
        review = client.AuthenticationV1Api(self.api).create_token_review(
            client.V1TokenReview(spec=client.V1TokenReviewSpec(token=token))
        )
        status = review.status
        if status is None or not status.authenticated or status.user is None:
            return None
        user = status.user
        return Identity(
            username=user.username or "",
            uid=user.uid or "",
            groups=tuple(user.groups or ()),
            extra={key: list(values) for key, values in (user.extra or {}).items()},
        )

    def may_access_path(self, *, who: Identity, verb: str, path: str) -> bool:
        """Whether RBAC lets `who` do `verb` on the non-resource URL `path`
        (SubjectAccessReview)."""
        review = client.AuthorizationV1Api(self.api).create_subject_access_review(
            client.V1SubjectAccessReview(
                spec=client.V1SubjectAccessReviewSpec(
                    user=who.username,
                    uid=who.uid or None,
                    groups=list(who.groups),
                    extra=who.extra or None,
                    non_resource_attributes=client.V1NonResourceAttributes(path=path, verb=verb),
                )
            )
        )
        return bool(review.status and review.status.allowed)
