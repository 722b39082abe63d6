%% The workloads of `mote-bench` in Erlang/OTP, each the same shape as Mote's (see
%% bench/src/main.rs and bench/src/savina.rs), for ratios measured in one session.
%%
%%   erlc peers.erl && erl +S 2 -noshell -eval "peers:run(ring), init:stop()."
%%
%% Workloads: w1 (ping-pong, 1M messages), w2 (spawn 100k processes, one message each),
%% w3 (fan-out, 1k processes x 1k messages), ring (1,000 relays, 1M hops), chain (10,000
%% relays, 10 traversals), forkjoin (200 rounds of a ping to each of 1,000 echoes),
%% big (1,000 processes, 200 pings each to random others). Each prints one RESULT line.
-module(peers).
-export([run/1]).

now_us() -> erlang:monotonic_time(microsecond).

seconds(T0) -> (now_us() - T0) / 1.0e6.

result(Workload, Format, Args) ->
    io:format("RESULT runtime=erlang workload=~s " ++ Format ++ "~n", [Workload | Args]).

run(w1) ->
    N = 1000000,
    Self = self(),
    Pong = spawn(fun pong/0),
    T0 = now_us(),
    spawn(fun() -> ping(Pong, N div 2), Self ! done end),
    receive done -> ok end,
    S = seconds(T0),
    Pong ! stop,
    result(w1, "messages=~p seconds=~.6f msgs_per_sec=~p", [N, S, round(N / S)]);
run(w2) ->
    N = 100000,
    Self = self(),
    erlang:garbage_collect(),
    M0 = erlang:memory(processes),
    T0 = now_us(),
    Pids = [spawn(fun() -> receive {get, From} -> From ! {value, 0} end end)
            || _ <- lists:seq(1, N)],
    Spawned = seconds(T0),
    M1 = erlang:memory(processes),
    [P ! {get, Self} || P <- Pids],
    [receive {value, _} -> ok end || _ <- Pids],
    S = seconds(T0),
    result(w2, "actors=~p spawns_per_sec=~p spawn_plus_msg_per_sec=~p bytes_per_actor=~p",
           [N, round(N / Spawned), round(N / S), (M1 - M0) div N]);
run(w3) ->
    {Actors, PerActor} = {1000, 1000},
    Self = self(),
    Pids = [spawn(fun() -> counter(0) end) || _ <- lists:seq(1, Actors)],
    T0 = now_us(),
    [[P ! {add, 1} || P <- Pids] || _ <- lists:seq(1, PerActor)],
    [P ! {get, Self} || P <- Pids],
    [receive {value, PerActor} -> ok end || _ <- Pids],
    S = seconds(T0),
    M = Actors * PerActor,
    result(w3, "actors=~p messages=~p seconds=~.6f msgs_per_sec=~p", [Actors, M, S, round(M / S)]);
run(ring) ->
    {Actors, Hops} = {1000, 1000000},
    Self = self(),
    Pids = list_to_tuple([spawn(fun() -> relay(none, Self) end) || _ <- lists:seq(1, Actors)]),
    [element(I, Pids) ! {next, element(I rem Actors + 1, Pids)} || I <- lists:seq(1, Actors)],
    T0 = now_us(),
    element(1, Pids) ! {token, Hops},
    receive token_done -> ok end,
    S = seconds(T0),
    result(ring, "actors=~p hops=~p seconds=~.6f msgs_per_sec=~p", [Actors, Hops, S, round(Hops / S)]);
run(chain) ->
    {Actors, Traversals} = {10000, 10},
    Self = self(),
    Pids = list_to_tuple([spawn(fun() -> relay(none, Self) end) || _ <- lists:seq(1, Actors)]),
    [element(I, Pids) ! {next, element(I + 1, Pids)} || I <- lists:seq(1, Actors - 1)],
    element(Actors, Pids) ! {next, Self},
    T0 = now_us(),
    [begin element(1, Pids) ! {token, Actors}, receive {token, 0} -> ok end end
     || _ <- lists:seq(1, Traversals)],
    S = seconds(T0),
    Hops = Actors * Traversals,
    result(chain, "actors=~p traversals=~p seconds=~.6f us_per_traversal=~p msgs_per_sec=~p",
           [Actors, Traversals, S, round(S * 1.0e6 / Traversals), round(Hops / S)]);
run(forkjoin) ->
    {Actors, Rounds} = {1000, 200},
    Self = self(),
    Pids = [spawn(fun echo/0) || _ <- lists:seq(1, Actors)],
    T0 = now_us(),
    [begin
         [P ! {ping, Self} || P <- Pids],
         [receive pong -> ok end || _ <- Pids]
     end || _ <- lists:seq(1, Rounds)],
    S = seconds(T0),
    M = 2 * Actors * Rounds,
    result(forkjoin, "actors=~p rounds=~p messages=~p seconds=~.6f msgs_per_sec=~p",
           [Actors, Rounds, M, S, round(M / S)]);
run(big) ->
    {Actors, Pings} = {1000, 200},
    Self = self(),
    Pids = list_to_tuple([spawn(fun() -> big_init(I, Pings) end) || I <- lists:seq(1, Actors)]),
    [element(I, Pids) ! {peers, Pids, Self} || I <- lists:seq(1, Actors)],
    T0 = now_us(),
    [element(I, Pids) ! start || I <- lists:seq(1, Actors)],
    [receive big_done -> ok end || _ <- lists:seq(1, Actors)],
    S = seconds(T0),
    M = 2 * Actors * Pings,
    result(big, "actors=~p pings=~p messages=~p seconds=~.6f msgs_per_sec=~p",
           [Actors, Pings, M, S, round(M / S)]).

pong() ->
    receive
        {ping, From} -> From ! pong, pong();
        stop -> ok
    end.

ping(_, 0) -> ok;
ping(Pong, K) ->
    Pong ! {ping, self()},
    receive pong -> ping(Pong, K - 1) end.

counter(C) ->
    receive
        {add, K} -> counter(C + K);
        {get, From} -> From ! {value, C}, counter(C)
    end.

relay(Next, Report) ->
    receive
        {next, N} -> relay(N, Report);
        {token, 0} when Next =:= Report -> Report ! {token, 0}, relay(Next, Report);
        {token, 0} -> Report ! token_done, relay(Next, Report);
        {token, K} -> Next ! {token, K - 1}, relay(Next, Report)
    end.

echo() ->
    receive {ping, From} -> From ! pong, echo() end.

big_init(I, Pings) ->
    receive {peers, Peers, Report} -> big(I, Peers, Pings, 0, Report) end.

big(I, Peers, Pings, Answered, Report) ->
    receive
        start ->
            big_ping(I, Peers),
            big(I, Peers, Pings, Answered, Report);
        {ping, From} ->
            From ! pong,
            big(I, Peers, Pings, Answered, Report);
        pong when Answered + 1 < Pings ->
            big_ping(I, Peers),
            big(I, Peers, Pings, Answered + 1, Report);
        pong ->
            Report ! big_done,
            big(I, Peers, Pings, Answered + 1, Report)
    end.

big_ping(I, Peers) ->
    N = tuple_size(Peers),
    P = rand:uniform(N),
    Peer = case P of I -> P rem N + 1; _ -> P end,
    element(Peer, Peers) ! {ping, self()}.
