// `npm start` until the durable node exists: say plainly what runs today instead of pretending.
console.log(`tickraft is not a running cluster yet.

What exists today:
  - the pure Raft core (src/raft) and a deterministic cluster simulator (test/sim):
      npm run sim -- --seeds 50      run 50 random seeds with faults
      npm run sim -- --seed 42       replay one seed and print its trace tail
  - schedule maths and a preview command that needs no cluster:
      npm run tickctl -- preview '*/15 * * * *' --tz Europe/Paris --count 5

Once the durable node lands, this command builds and starts a local 3-node cluster.`);
