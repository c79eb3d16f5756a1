"""The public façade: sorted __all__, every name once, pinned names present."""

import trio_actors


def test_all_is_sorted_and_unique() -> None:
    assert list(trio_actors.__all__) == sorted(trio_actors.__all__)
    assert len(set(trio_actors.__all__)) == len(trio_actors.__all__)


def test_pinned_names_are_exported() -> None:
    pinned = {
        "open_actor_system",
        "ServingPolicy",
        "DEFAULT_BATCH",
        "DEFAULT_CLEANUP_BATCH",
        "Actor",
        "ActorSystem",
        "ActorRef",
        "DeadLetter",
        "ActorError",
        "ActorStopped",
    }
    assert pinned <= set(trio_actors.__all__)
    assert trio_actors.DEFAULT_BATCH == 64
    assert trio_actors.DEFAULT_CLEANUP_BATCH == 32


def test_public_classes_say_they_live_in_trio_actors() -> None:
    for name in trio_actors.__all__:
        obj = getattr(trio_actors, name)
        if isinstance(obj, type):
            assert obj.__module__ == "trio_actors", name


def test_actor_stopped_is_an_actor_error() -> None:
    assert issubclass(trio_actors.ActorStopped, trio_actors.ActorError)


def test_the_observe_face_is_its_two_options_and_says_where_they_live() -> None:
    from trio_actors import observe

    assert observe.__all__ == ["Metrics", "Tracing"]
    assert observe.Tracing.__module__ == "trio_actors.observe"
    assert observe.Metrics.__module__ == "trio_actors.observe"
    assert "tracing" in trio_actors.open_actor_system.__code__.co_varnames
    assert "metrics" in trio_actors.open_actor_system.__code__.co_varnames
